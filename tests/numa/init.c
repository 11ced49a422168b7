/*
 * init.c - /init of the two-node guest of tests/numa/numa.sh, linked
 * static: mounts what the daemon needs, starts hpzerod, runs the client's
 * checks and hpzctl, stops the daemon, says how it went on the console and
 * powers the guest off.  Every line the script reads starts "NUMA ".
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define DAEMON		"/hpz/hpzerod"
#define HPZCTL		"/hpz/hpzctl"
#define CLIENT		"/hpz/numa-client"
#define SOCK		"/run/hpzerod/hpzerod.sock"
#define LOG		"/tmp/hpzerod.log"
#define START_S		120	/* the daemon's start, under TCG */
#define CLIENT_S	100	/* the client's checks, under TCG */

static void	show_threads(pid_t);
static void	show_others(pid_t);

static void
say(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	printf("NUMA ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

static void
mnt(const char *src, const char *dir, const char *type, const char *opts)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, 0, opts) == -1)
		say("init: mount %s on %s: %s", type, dir, strerror(errno));
}

/*
 * Run argv with its output on the console; its wait status, or -1.  After
 * limit_s (0: none) every thread's whereabouts are shown and it is killed.
 */
static int
run(char *const argv[], int limit_s, pid_t daemon)
{
	struct timespec	ts = { 0, 100 * 1000 * 1000 };
	pid_t		pid;
	int		st, i;

	if ((pid = fork()) == -1)
		return (-1);
	if (pid == 0) {
		execv(argv[0], argv);
		say("init: exec %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	for (i = 0; limit_s > 0 && i < limit_s * 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return (st);
		nanosleep(&ts, NULL);
	}
	if (limit_s > 0) {
		say("FAIL %s: not done after %d s; where each thread waits:",
		    argv[0], limit_s);
		show_threads(daemon);
		show_others(daemon);
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return (-1);
	return (st);
}

/* Copy the daemon's log to the console, each line marked. */
static void
show_log(void)
{
	char	 line[1024];
	FILE	*f;

	if ((f = fopen(LOG, "r")) == NULL)
		return;
	printf("--- hpzerod log ---\n");
	while (fgets(line, sizeof(line), f) != NULL)
		fputs(line, stdout);
	printf("--- end of log ---\n");
	fflush(stdout);
	fclose(f);
}

/*
 * The guest's memory outside the huge pages, on the console: a process
 * killed for memory (the sanitizer build's are bigger) shows what was left.
 */
static void
show_mem(const char *when)
{
	char	 line[128];
	long	 total = -1, avail = -1, v;
	FILE	*f;

	if ((f = fopen("/proc/meminfo", "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "MemTotal: %ld kB", &v) == 1)
			total = v;
		else if (sscanf(line, "MemAvailable: %ld kB", &v) == 1)
			avail = v;
	}
	fclose(f);
	say("memory %s: %ld of %ld MiB available", when, avail / 1024,
	    total / 1024);
}

/* Does the daemon's log say it is ready? */
static int
log_ready(void)
{
	char	 line[1024];
	FILE	*f;
	int	 ready = 0;

	if ((f = fopen(LOG, "r")) == NULL)
		return (0);
	while (!ready && fgets(line, sizeof(line), f) != NULL)
		ready = strstr(line, " ready: ") != NULL;
	fclose(f);
	return (ready);
}

/* Print path (a small /proc file) after a label. */
static void
show_file(const char *label, const char *path)
{
	char	 buf[4096];
	ssize_t	 n;
	int	 fd;

	if ((fd = open(path, O_RDONLY)) == -1)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	printf("%s:\n%s%s", label, buf, buf[n - 1] == '\n' ? "" : "\n");
}

/* Where every thread of pid waits: its state, wchan and kernel stack. */
static void
show_threads(pid_t pid)
{
	char		 path[320], label[320], comm[32];
	struct dirent	*de;
	DIR		*d;
	ssize_t		 n;
	int		 fd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
		    de->d_name);
		comm[0] = '\0';
		if ((fd = open(path, O_RDONLY)) != -1) {
			if ((n = read(fd, comm, sizeof(comm) - 1)) > 0)
				comm[n - 1] = '\0';
			close(fd);
		}
		snprintf(label, sizeof(label), "--- %d/%s %s stat",
		    (int)pid, de->d_name, comm);
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid,
		    de->d_name);
		show_file(label, path);
		snprintf(label, sizeof(label), "--- %d/%s %s stack",
		    (int)pid, de->d_name, comm);
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stack",
		    (int)pid, de->d_name);
		show_file(label, path);
	}
	closedir(d);
	fflush(stdout);
}

/* Every process but init's and the daemon's. */
static void
show_others(pid_t daemon)
{
	struct dirent	*de;
	DIR		*d;
	pid_t		 pid;

	if ((d = opendir("/proc")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		pid = (pid_t)atoi(de->d_name);
		if (pid > 1 && pid != daemon && pid != getpid()) {
			char	path[64], link[256];

			/* Kernel threads have no program. */
			snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
			if (readlink(path, link, sizeof(link)) > 0)
				show_threads(pid);
		}
	}
	closedir(d);
}

static void
off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

int
main(void)
{
	char		 pidbuf[16];
	char *const	 ctl[] = { HPZCTL, "-s", SOCK, "status", NULL };
	char		*client[] = { CLIENT, pidbuf, NULL };
	struct timespec	 ts = { 0, 100 * 1000 * 1000 };
	pid_t		 daemon;
	int		 fd, st, i, rc = 1;

	mnt("proc", "/proc", "proc", NULL);
	mnt("sys", "/sys", "sysfs", NULL);
	mnt("dev", "/dev", "devtmpfs", NULL);
	if ((fd = open("/dev/console", O_RDWR)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	mnt("tmp", "/tmp", "tmpfs", NULL);
	mnt("run", "/run", "tmpfs", NULL);
	mnt("hugetlbfs", "/dev/hugepages", "hugetlbfs", NULL);
	mkdir("/run/hpzerod", 0755);
	setenv("PATH", "/hpz:/bin", 1);
	setenv("HPZ_SOCKET", SOCK, 1);
	setenv("LD_LIBRARY_PATH", "/hpz/lib", 1);
	say("boot");

	if ((daemon = fork()) == -1) {
		say("FAIL init: fork: %s", strerror(errno));
		off();
	}
	if (daemon == 0) {
		if ((fd = open(LOG, O_WRONLY | O_CREAT | O_TRUNC, 0644)) != -1)
			dup2(fd, 2);
		execl(DAEMON, DAEMON, "-c", "/etc/hpzerod.conf", "-s", SOCK,
		    (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < START_S * 10 && !log_ready(); i++) {
		if (waitpid(daemon, &st, WNOHANG) == daemon) {
			say("FAIL daemon: exited at start (status %d)", st);
			show_log();
			off();
		}
		nanosleep(&ts, NULL);
	}
	if (!log_ready()) {
		say("FAIL daemon: not ready after %d s", START_S);
		show_log();
		off();
	}
	say("daemon ready pid %d", (int)daemon);
	show_mem("with the daemon up");

	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)daemon);
	st = run(client, CLIENT_S, daemon);
	if (st != -1 && WIFEXITED(st))
		rc = WEXITSTATUS(st);
	say("client status %d", st);
	show_mem("after the client");
	run(ctl, 0, daemon);

	kill(daemon, SIGTERM);
	while (waitpid(daemon, &st, 0) == -1 && errno == EINTR)
		;
	say("daemon exit %d", WIFEXITED(st) ? WEXITSTATUS(st) :
	    128 + WTERMSIG(st));
	show_log();
	say("end rc %d", rc);
	off();
	return (0);
}
