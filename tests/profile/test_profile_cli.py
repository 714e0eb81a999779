"""profile job through `lmperfd run` (one-shot): bad specs are rejected naming
the field; on a CPU worker (--cpu-only) the job is refused the same way, saying
it needs a GPU."""
import json
import subprocess
import sys

LMPERFD = sys.argv[1]
failures = 0


def run(spec, *args):
    p = subprocess.run([LMPERFD, "run", "-", *args], input=json.dumps(spec), capture_output=True, text=True,
                       timeout=60)
    return p.returncode, json.loads(p.stdout)


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += not cond


base = {"kind": "profile", "model": "tiny", "context_length": 16}
for field, value in [("profile_steps", 0), ("profile_steps", 11), ("warmup_steps", -1), ("warmup_steps", "2"),
                     ("mode", "forward_backward"), ("precision", "fp8"), ("bogus", 1), ("context_length", 0),
                     ("graphs", "yes"), ("graphs", 1),
                     ("model", "nonexistent")]:
    rc, out = run(dict(base, **{field: value}))
    err = out.get("error", {})
    check(rc == 2 and err.get("code") == "invalid_spec" and err.get("field") == field,
          "%s=%r rejected naming the field (got %s)" % (field, value, err))

rc, out = run(dict(base, mode=["forward", "train_step"]), "--cpu-only")
err = out.get("error", {})
check(rc == 2 and err.get("code") == "invalid_spec" and err.get("field") == "kind",
      "CPU worker: the job refused naming kind (rc %d, %s)" % (rc, err))
check("profile jobs need a GPU worker" in (err.get("message") or ""), "CPU worker: reason %r" % err.get("message"))
sys.exit(1 if failures else 0)
