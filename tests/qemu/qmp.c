/*
 * qmp.c - a QMP client for the QEMU tests: connect to a monitor socket,
 * leave capability negotiation, run each command given, print what each
 * returned as one line of JSON.  "sleep N" as a command waits N seconds.
 * Events are skipped, but for -e NAME: each NAME event's data.status is
 * printed as "NAME STATUS" when it comes, and after the last command qmp
 * waits for one whose status ends a migration (completed, failed,
 * cancelled, postcopy-paused).  Exit 0, or 1 with QEMU's error (or ours)
 * on stderr.
 *
 *	qmp [-w seconds] [-e event] socket command-json ...
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <json-c/json.h>

#define QMP_LINE_MAX	(1 << 20)
#define QMP_REPLY_S	60	/* a command's reply: "did not hang" */

static char	 qmp_buf[QMP_LINE_MAX];
static size_t	 qmp_len;
static const char *qmp_event;	/* -e */
static int	 qmp_ended;	/* a -e event ended the migration */

static int
qmp_connect(const char *path, int wait_s)
{
	struct sockaddr_un	 sun;
	time_t			 until = time(NULL) + wait_s;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "qmp: %s: path too long\n", path);
		return (-1);
	}
	strcpy(sun.sun_path, path);
	for (;;) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
			break;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return (fd);
		close(fd);
		if (time(NULL) >= until)
			break;
		usleep(50 * 1000);
	}
	fprintf(stderr, "qmp: connect %s: %s\n", path, strerror(errno));
	return (-1);
}

/* The next line from QEMU (without its newline), or NULL. */
static char *
qmp_line(int fd)
{
	static size_t	 used;		/* bytes of the last line handed out */
	struct pollfd	 pfd = { .fd = fd, .events = POLLIN };
	char		*nl;
	ssize_t		 n;

	if (used != 0) {
		memmove(qmp_buf, qmp_buf + used, qmp_len - used);
		qmp_len -= used;
		used = 0;
	}
	for (;;) {
		if ((nl = memchr(qmp_buf, '\n', qmp_len)) != NULL) {
			*nl = '\0';
			used = (size_t)(nl - qmp_buf) + 1;
			return (qmp_buf);
		}
		if (qmp_len == sizeof(qmp_buf)) {
			fprintf(stderr, "qmp: a line over %d bytes\n",
			    QMP_LINE_MAX);
			return (NULL);
		}
		if (poll(&pfd, 1, QMP_REPLY_S * 1000) != 1) {
			fprintf(stderr, "qmp: no answer in %d s\n",
			    QMP_REPLY_S);
			return (NULL);
		}
		n = read(fd, qmp_buf + qmp_len, sizeof(qmp_buf) - qmp_len);
		if (n <= 0) {
			fprintf(stderr, "qmp: connection closed%s%s\n",
			    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return (NULL);
		}
		qmp_len += (size_t)n;
	}
}

/* An event: if it is the one asked for, print its status. */
static void
qmp_saw_event(struct json_object *o)
{
	struct json_object	*e, *d, *st;
	const char		*status;

	if (qmp_event == NULL || !json_object_object_get_ex(o, "event", &e) ||
	    strcmp(json_object_get_string(e), qmp_event) != 0)
		return;
	status = json_object_object_get_ex(o, "data", &d) &&
	    json_object_object_get_ex(d, "status", &st) ?
	    json_object_get_string(st) : "?";
	printf("%s %s\n", qmp_event, status);
	fflush(stdout);
	if (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
	    strcmp(status, "cancelled") == 0 ||
	    strcmp(status, "postcopy-paused") == 0)
		qmp_ended = 1;
}

/* Wait for the event that ends a migration.  0, or 1. */
static int
qmp_wait_end(int fd)
{
	struct json_object	*o;
	char			*line;

	while (!qmp_ended) {
		if ((line = qmp_line(fd)) == NULL)
			return (1);
		if ((o = json_tokener_parse(line)) == NULL) {
			fprintf(stderr, "qmp: not JSON: %s\n", line);
			return (1);
		}
		qmp_saw_event(o);
		json_object_put(o);
	}
	return (0);
}

/* Send cmd; print its return value if asked.  0, or 1 on an error. */
static int
qmp_run(int fd, const char *cmd, int print)
{
	struct json_object	*o, *v, *d;
	char			*line;
	size_t			 len = strlen(cmd);
	int			 rc;

	if (write(fd, cmd, len) != (ssize_t)len || write(fd, "\n", 1) != 1) {
		fprintf(stderr, "qmp: write: %s\n", strerror(errno));
		return (1);
	}
	for (;;) {
		if ((line = qmp_line(fd)) == NULL)
			return (1);
		if ((o = json_tokener_parse(line)) == NULL) {
			fprintf(stderr, "qmp: not JSON: %s\n", line);
			return (1);
		}
		if (json_object_object_get_ex(o, "return", &v)) {
			if (print)
				printf("%s\n", json_object_to_json_string_ext(
				    v, JSON_C_TO_STRING_PLAIN));
			rc = 0;
			break;
		}
		if (json_object_object_get_ex(o, "error", &v)) {
			fprintf(stderr, "qmp: %s: %s\n", cmd,
			    json_object_object_get_ex(v, "desc", &d) ?
			    json_object_get_string(d) : line);
			rc = 1;
			break;
		}
		qmp_saw_event(o);	/* an event, or the greeting */
		json_object_put(o);
	}
	json_object_put(o);
	return (rc);
}

int
main(int argc, char **argv)
{
	int	ch, fd, i, wait_s = 0;

	while ((ch = getopt(argc, argv, "e:w:")) != -1) {
		switch (ch) {
		case 'e':
			qmp_event = optarg;
			break;
		case 'w':
			wait_s = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind < 1)
		goto usage;
	if ((fd = qmp_connect(argv[optind], wait_s)) == -1)
		return (1);
	if (qmp_run(fd, "{\"execute\":\"qmp_capabilities\"}", 0) != 0)
		return (1);
	for (i = optind + 1; i < argc; i++) {
		if (strncmp(argv[i], "sleep ", 6) == 0) {
			sleep((unsigned int)atoi(argv[i] + 6));
			continue;
		}
		if (qmp_run(fd, argv[i], 1) != 0)
			return (1);
		fflush(stdout);
	}
	if (qmp_event != NULL && qmp_wait_end(fd) != 0)
		return (1);
	close(fd);
	return (0);
usage:
	fprintf(stderr, "usage: qmp [-w seconds] [-e event] socket "
	    "command-json ...\n");
	return (2);
}
