/*
 * fdstore-probe.c - what the host's systemd keeps in a service's fd store
 * across a stop and start of the service (tests/debian/package.sh).
 *
 * fdstore-probe LOG
 *   Run as a Type=notify service with FileDescriptorStoreMax= set.  On
 *   start it appends one line to LOG: the fds systemd passed (LISTEN_FDS,
 *   LISTEN_FDNAMES) and what the one named "probe" holds (the pid of the
 *   instance that stored it).  With none passed it stores a memfd of its
 *   own holding its pid, as hpzerod stores its regions (fdstore.c: FDSTORE=1
 *   with a name).  Then READY=1, and it waits to be stopped.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <systemd/sd-daemon.h>

int
main(int argc, char **argv)
{
	char		**names = NULL, buf[64];
	const char	 *owner = "none";
	FILE		 *log;
	ssize_t		  len;
	int		  n, i, fd;

	if (argc != 2 || (log = fopen(argv[1], "a")) == NULL)
		return (2);
	n = sd_listen_fds_with_names(0, &names);
	for (i = 0; i < n; i++)
		if (names != NULL && strcmp(names[i], "probe") == 0 &&
		    (len = pread(SD_LISTEN_FDS_START + i, buf, sizeof(buf) - 1,
		    0)) > 0) {
			buf[len] = '\0';
			owner = buf;
		}
	fprintf(log, "pid %d: %d fds from the store (%s); the probe memfd "
	    "stored by pid %s\n", (int)getpid(), n < 0 ? 0 : n,
	    n > 0 && names != NULL ? names[0] : "-", owner);
	fclose(log);
	if (n <= 0) {
		fd = memfd_create("probe", MFD_CLOEXEC);
		len = snprintf(buf, sizeof(buf), "%d", (int)getpid());
		if (fd < 0 || write(fd, buf, (size_t)len) != len ||
		    sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=probe", &fd,
		    1) <= 0)
			return (1);
		close(fd);
	}
	sd_notify(0, "READY=1");
	for (;;)
		pause();
}
