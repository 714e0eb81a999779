/* One line per event on stderr: time, level, subsystem, message. Only the
 * program layer (daemon/, HTTP dispatch, runners) logs; kernels/ never does. */
#ifndef DAEMON_LOG_H
#define DAEMON_LOG_H

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

void log_set_level(log_level level);
void log_msg(log_level level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_info(sub, ...) log_msg(LOG_INFO, sub, __VA_ARGS__)
#define log_warn(sub, ...) log_msg(LOG_WARN, sub, __VA_ARGS__)
#define log_error(sub, ...) log_msg(LOG_ERROR, sub, __VA_ARGS__)
#define log_debug(sub, ...) log_msg(LOG_DEBUG, sub, __VA_ARGS__)

#endif
