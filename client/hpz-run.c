/*
 * hpz-run.c - run an unmodified program (a VM monitor, typically) with its
 * huge-page guest RAM served by hpzerod: check the options, set the
 * environment libhpz-preload.so reads, put it first in LD_PRELOAD, exec.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "hpz.h"
#include "runflags.h"
#include "runselect.h"
#include "size.h"
#include "cli.h"

#ifndef HPZ_PRELOAD_PATH
#define HPZ_PRELOAD_PATH	"/usr/local/lib/hpzerod/libhpz-preload.so"
#endif

#define RUN_EXIT_CANNOT_EXEC	126
#define RUN_EXIT_NOT_FOUND	127

static void
run_usage(FILE *f)
{
	fprintf(f,
"usage: hpz-run [-hv] [-F fd] [-f flags] [-m min-size] [-n pattern]\n"
"               [-s socket] [-x pattern] [--] program [args ...]\n"
"\n"
"Run program with its large MAP_SHARED hugetlbfs and shmem mappings (guest\n"
"RAM) registered with hpzerod, so their pages are cleared by the daemon.\n"
"\n"
"  -f, --flags LIST     region flags, comma separated: discard, ahead\n"
"                       (or onfault), eager, premap, noscrub, none;\n"
"                       nopremap: leave ready pages unmapped until touched;\n"
"                       nopool: no file from hpzerod's pre-zeroed pool\n"
"                       (default: $HPZ_RUN_FLAGS, else none)\n"
"  -m, --min-size SIZE  smallest mapping to register, bytes with an optional\n"
"                       K, M, G or T suffix (default: $HPZ_RUN_MIN, else 64M)\n"
"  -n, --name PATTERN   register only files whose name matches PATTERN\n"
"                       (fnmatch; /memfd:NAME for a memfd, else the path);\n"
"                       may be repeated\n"
"  -x, --exclude PATTERN  never register files whose name matches PATTERN;\n"
"                       may be repeated; wins over -n and -F\n"
"  -F, --fd FD          register only the file open on FD (which program\n"
"                       inherits), besides any -n; may be repeated\n"
"  -s, --socket PATH    hpzerod's socket (default: $HPZ_SOCKET, else\n"
"                       " HPZ_SOCKET_DEFAULT ")\n"
"  -v, --verbose        print a line for each mapping registered\n"
"  -h, --help           print this help\n"
"\n"
"The preload library is " HPZ_PRELOAD_PATH ";\n"
"$HPZ_PRELOAD names another.  Children of program inherit LD_PRELOAD.\n");
}

/* A bad command line: say what is wrong and where the help is, exit 2. */
#define run_usage_error(...)	cli_usage_error(NULL, __VA_ARGS__)

/* "64M", "1G", "4096": bytes with an optional K/M/G/T suffix. */
static int
run_parse_size(const char *s, unsigned long long *out)
{
	uint64_t	v;

	if (size_parse(s, &v) != 0 || v > SIZE_MAX)
		return (-1);
	*out = v;
	return (0);
}

/* Check a flag list; exit with the valid names if a word is not one. */
static void
run_check_flags(const char *what, const char *s)
{
	unsigned int	flags;
	char		bad[64], valid[128];

	if (runflags_parse(s, &flags, bad, sizeof(bad)) != 0)
		run_usage_error("%s: unknown flag '%s' (valid: %s)", what, bad,
		    runflags_valid(valid, sizeof(valid)));
}

/* Where execvp will find program, for the static-binary check; or NULL. */
static char *
run_find_program(const char *prog)
{
	const char	*path, *p, *q;
	char		 buf[PATH_MAX];
	struct stat	 sb;
	size_t		 n;

	if (strchr(prog, '/') != NULL)
		return (strdup(prog));
	if ((path = getenv("PATH")) == NULL)
		path = "/bin:/usr/bin";
	for (p = path; ; p = q + 1) {
		q = strchr(p, ':');
		n = q != NULL ? (size_t)(q - p) : strlen(p);
		if (n == 0)
			snprintf(buf, sizeof(buf), "%s", prog);
		else
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog);
		if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    access(buf, X_OK) == 0)
			return (strdup(buf));
		if (q == NULL)
			return (NULL);
	}
}

/*
 * What run_is_static reads of an ELF file, written once for both classes
 * (Elf64_* and Elf32_* have the same field names, not the same types):
 * the header's program header table, if it is an executable; the type of
 * the program header at off, or -1.
 */
#define RUN_ELF_HEADER(fd, e, phoff, phnum, phentsize)			\
	(pread((fd), &(e), sizeof(e), 0) == (ssize_t)sizeof(e) &&	\
	((e).e_type == ET_EXEC || (e).e_type == ET_DYN) &&		\
	((phoff) = (e).e_phoff, (phnum) = (e).e_phnum,			\
	(phentsize) = (e).e_phentsize, 1))
#define RUN_ELF_PTYPE(fd, p, off)					\
	(pread((fd), &(p), sizeof(p), (off)) == (ssize_t)sizeof(p) ?	\
	(long)(p).p_type : -1L)

/* 1 if path is an ELF executable with no interpreter: no LD_PRELOAD. */
static int
run_is_static(const char *path)
{
	unsigned char	 id[EI_NIDENT];
	Elf64_Ehdr	 e64;
	Elf32_Ehdr	 e32;
	Elf64_Phdr	 p64;
	Elf32_Phdr	 p32;
	uint64_t	 phoff = 0;
	unsigned int	 phnum = 0, phentsize = 0, i;
	off_t		 off;
	long		 type;
	int		 fd, ok, result = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (0);
	if (pread(fd, id, sizeof(id), 0) != (ssize_t)sizeof(id) ||
	    memcmp(id, ELFMAG, SELFMAG) != 0)
		goto out;
	if (id[EI_CLASS] == ELFCLASS64)
		ok = RUN_ELF_HEADER(fd, e64, phoff, phnum, phentsize);
	else if (id[EI_CLASS] == ELFCLASS32)
		ok = RUN_ELF_HEADER(fd, e32, phoff, phnum, phentsize);
	else
		ok = 0;
	if (!ok || phnum == 0 || phentsize == 0)
		goto out;
	for (i = 0; i < phnum; i++) {
		off = (off_t)(phoff + (uint64_t)i * phentsize);
		if (id[EI_CLASS] == ELFCLASS64)
			type = RUN_ELF_PTYPE(fd, p64, off);
		else
			type = RUN_ELF_PTYPE(fd, p32, off);
		if (type == -1 || type == PT_INTERP)
			goto out;
	}
	result = 1;
out:
	close(fd);
	return (result);
}

/* Put the preload library first in LD_PRELOAD, once. */
static void
run_set_preload(const char *lib)
{
	const char	*old = getenv("LD_PRELOAD"), *p;
	char		*val;
	size_t		 n, len = strlen(lib);

	if (old != NULL) {
		for (p = old; *p != '\0'; p += n) {
			p += strspn(p, " :");
			n = strcspn(p, " :");
			if (n == len && strncmp(p, lib, n) == 0)
				return;
		}
	}
	if (old == NULL || old[strspn(old, " :")] == '\0')
		val = strdup(lib);
	else if (asprintf(&val, "%s:%s", lib, old) == -1)
		val = NULL;
	if (val == NULL || setenv("LD_PRELOAD", val, 1) == -1) {
		fprintf(stderr, "hpz-run: cannot set LD_PRELOAD: %s\n",
		    strerror(errno));
		exit(RUN_EXIT_CANNOT_EXEC);
	}
	free(val);
}

/* The preload library as an absolute path; exits 127 if it is missing. */
static char *
run_preload_path(void)
{
	const char	*lib = getenv("HPZ_PRELOAD"), *why = NULL;
	char		*abs;
	struct stat	 sb;

	if (lib == NULL || *lib == '\0')
		lib = HPZ_PRELOAD_PATH;
	abs = NULL;
	if (stat(lib, &sb) == -1)
		why = strerror(errno);
	else if (!S_ISREG(sb.st_mode))
		why = "not a regular file";
	else if ((abs = realpath(lib, NULL)) == NULL)
		why = strerror(errno);
	if (abs == NULL) {
		fprintf(stderr, "hpz-run: preload library %s: %s (is hpzerod "
		    "installed? HPZ_PRELOAD may name the library)\n", lib, why);
		exit(RUN_EXIT_NOT_FOUND);
	}
	if (strpbrk(abs, " :") != NULL) {
		fprintf(stderr, "hpz-run: preload library %s: LD_PRELOAD "
		    "cannot hold a path with a space or a colon\n", abs);
		exit(RUN_EXIT_NOT_FOUND);
	}
	return (abs);
}

/* Add a line to a list of lines (patterns, files); exits on no memory. */
static void
run_add_line(char **list, const char *line)
{
	char	*n;

	if (asprintf(&n, "%s%s%s", *list != NULL ? *list : "",
	    *list != NULL ? "\n" : "", line) == -1) {
		fprintf(stderr, "hpz-run: out of memory\n");
		exit(RUN_EXIT_CANNOT_EXEC);
	}
	free(*list);
	*list = n;
}

/* A -n or -x pattern: one line, not empty. */
static void
run_add_pattern(char **list, const char *opt, const char *pat)
{
	if (*pat == '\0' || strchr(pat, '\n') != NULL)
		run_usage_error("%s: a pattern must be one line, not empty", opt);
	run_add_line(list, pat);
}

/* -F fd: the file open there, as DEV:INO; it must be hugetlbfs or shmem. */
static void
run_add_fd(char **list, const char *arg)
{
	struct statfs	 sfs;
	char		*end, line[64];
	long		 fd;

	errno = 0;
	fd = strtol(arg, &end, 10);
	if (*arg == '\0' || *end != '\0' || errno != 0 || fd < 0 ||
	    fd > INT_MAX)
		run_usage_error("-F: '%s' is not a file descriptor number", arg);
	if (runselect_file_line((int)fd, line, sizeof(line)) == -1)
		run_usage_error("-F %ld: %s (the fd must be open in hpz-run, "
		    "for program to inherit)", fd, strerror(errno));
	if (fstatfs((int)fd, &sfs) == -1 ||
	    ((long)sfs.f_type != HUGETLBFS_MAGIC &&
	    (long)sfs.f_type != TMPFS_MAGIC))
		run_usage_error("-F %ld: not a hugetlbfs or shmem file: hpzerod "
		    "cannot serve it", fd);
	if (fcntl((int)fd, F_GETFD) & FD_CLOEXEC)
		fprintf(stderr, "hpz-run: warning: -F %ld is close-on-exec: "
		    "program will not have it, only files it opens itself "
		    "match\n", fd);
	run_add_line(list, line);
}

static void
run_setenv(const char *name, const char *value)
{
	if (setenv(name, value, 1) == -1) {
		fprintf(stderr, "hpz-run: setenv %s: %s\n", name,
		    strerror(errno));
		exit(RUN_EXIT_CANNOT_EXEC);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "exclude",	required_argument,	NULL, 'x' },
		{ "fd",		required_argument,	NULL, 'F' },
		{ "flags",	required_argument,	NULL, 'f' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "min-size",	required_argument,	NULL, 'm' },
		{ "name",	required_argument,	NULL, 'n' },
		{ "socket",	required_argument,	NULL, 's' },
		{ "verbose",	no_argument,		NULL, 'v' },
		{ NULL,		0,			NULL, 0 }
	};
	const char		*flags = NULL, *min = NULL, *sock = NULL;
	char			*lib, *prog, cwd[PATH_MAX], buf[PATH_MAX + 32];
	char			*names = NULL, *excludes = NULL, *files = NULL;
	unsigned long long	 minval;
	int			 ch, verbose = 0, error;

	cli_prog = "hpz-run";
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:F:f:hm:n:s:vx:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'F':
			run_add_fd(&files, optarg);
			break;
		case 'n':
			run_add_pattern(&names, "-n", optarg);
			break;
		case 'x':
			run_add_pattern(&excludes, "-x", optarg);
			break;
		case 'f':
			flags = optarg;
			break;
		case 'h':
			run_usage(stdout);
			return (0);
		case 'm':
			min = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case ':':
			run_usage_error("option '%s' needs an argument",
			    argv[optind - 1]);
		default:
			if (optopt != 0)
				run_usage_error("unknown option '-%c'", optopt);
			run_usage_error("unknown option '%s'",
			    argv[optind - 1]);
		}
	}
	if (optind >= argc)
		run_usage_error("no program to run");

	/* Options win over the environment; both are checked here. */
	if (flags == NULL)
		flags = getenv("HPZ_RUN_FLAGS");
	if (flags != NULL) {
		run_check_flags(getenv("HPZ_RUN_FLAGS") == flags ?
		    "HPZ_RUN_FLAGS" : "-f", flags);
		run_setenv("HPZ_RUN_FLAGS", flags);
	}
	if (min == NULL && (min = getenv("HPZ_RUN_MIN")) != NULL &&
	    *min == '\0')
		min = NULL;
	if (min != NULL) {
		if (run_parse_size(min, &minval) != 0)
			run_usage_error("%s: '%s' is not a size (bytes, or "
			    "a number with K, M, G or T)", getenv("HPZ_RUN_MIN")
			    == min ? "HPZ_RUN_MIN" : "-m", min);
		snprintf(buf, sizeof(buf), "%llu", minval);
		run_setenv("HPZ_RUN_MIN", buf);
	}
	if (sock != NULL) {
		if (*sock == '\0')
			run_usage_error("-s: empty socket path");
		/* The program may change directory: keep the path whole. */
		if (*sock != '/' && getcwd(cwd, sizeof(cwd)) != NULL) {
			snprintf(buf, sizeof(buf), "%s/%s", cwd, sock);
			sock = buf;
		}
		run_setenv("HPZ_SOCKET", sock);
	}
	if (verbose)
		run_setenv("HPZ_RUN_VERBOSE", "1");
	/* A selection given here replaces one in the environment. */
	if (names != NULL || excludes != NULL || files != NULL) {
		unsetenv(RUNSELECT_ENV_NAME);
		unsetenv(RUNSELECT_ENV_EXCLUDE);
		unsetenv(RUNSELECT_ENV_FILE);
	}
	if (names != NULL)
		run_setenv(RUNSELECT_ENV_NAME, names);
	if (excludes != NULL)
		run_setenv(RUNSELECT_ENV_EXCLUDE, excludes);
	if (files != NULL)
		run_setenv(RUNSELECT_ENV_FILE, files);
	free(names);
	free(excludes);
	free(files);

	lib = run_preload_path();
	run_set_preload(lib);
	free(lib);

	if ((prog = run_find_program(argv[optind])) != NULL &&
	    run_is_static(prog))
		fprintf(stderr, "hpz-run: warning: %s is statically linked: "
		    "LD_PRELOAD cannot reach it, so hpzerod will serve "
		    "nothing of it\n", prog);
	free(prog);

	execvp(argv[optind], argv + optind);
	error = errno;
	fprintf(stderr, "hpz-run: %s: %s\n", argv[optind], strerror(error));
	return (error == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);
}
