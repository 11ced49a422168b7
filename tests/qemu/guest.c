/*
 * guest.c - the qemu.sh test guest: a multiboot (v1) kernel for a 32-bit
 * x86 PC.  It finds the top of the RAM that starts at 1 MiB, then checks
 * every 4 KiB page from the end of its own image (and of what the loader put
 * after it) to 20 MiB below that top: every 32-bit word must read zero on
 * first touch.  Then it writes a pattern to each of those pages and reads it
 * back.  It prints the result on COM1 and leaves through QEMU's
 * isa-debug-exit device at 0xf4: code 0 (QEMU exits 1) on success.
 *
 * With the word "touch" on its multiboot command line (QEMU -append touch)
 * it reads one 32-bit word of each of those pages, which must be zero, and
 * exits at once: no pattern pass.  vmstart.sh times that.
 *
 * Freestanding: no libc, no SSE, no 64-bit division, paging off.
 */
#include <stdint.h>

#define MB_BOOT_MAGIC	0x2BADB002u
#define MB_INFO_MEM	(1u << 0)
#define MB_INFO_CMDLINE	(1u << 2)
#define MB_INFO_MODS	(1u << 3)
#define MB_INFO_MMAP	(1u << 6)
#define MB_INFO_LOADER	(1u << 9)

#define PAGE		4096u
#define MIB		(1024u * 1024u)
/*
 * Firmware writes near the top of RAM: SeaBIOS 1.16 (QEMU 7.2) keeps its
 * tables in the top 128 KiB and dirties ~104 KiB just below 16 MiB under
 * the end of RAM.  Leave out the top 20 MiB.
 */
#define TOP_SKIP	(20u * MIB)
#define PATTERN		0x5aa5c33cu

#define COM1		0x3f8
#define DEBUG_EXIT	0xf4

enum guest_exit {
	EXIT_OK = 0,		/* QEMU exits 1 */
	EXIT_BOOT = 1,		/* not multiboot, or no memory map: 3 */
	EXIT_NONZERO = 2,	/* a word read non-zero on first touch: 5 */
	EXIT_PATTERN = 3,	/* the pattern did not read back: 7 */
	EXIT_RANGE = 4,		/* nothing to check: 9 */
};

struct mb_info {
	uint32_t	flags;
	uint32_t	mem_lower;
	uint32_t	mem_upper;
	uint32_t	boot_device;
	uint32_t	cmdline;
	uint32_t	mods_count;
	uint32_t	mods_addr;
	uint32_t	syms[4];
	uint32_t	mmap_length;
	uint32_t	mmap_addr;
	uint32_t	drives_length;
	uint32_t	drives_addr;
	uint32_t	config_table;
	uint32_t	boot_loader_name;
	uint32_t	apm_table;
	uint32_t	vbe[6];
	uint32_t	fb[8];
};

struct mb_mod {
	uint32_t	mod_start;
	uint32_t	mod_end;
	uint32_t	string;
	uint32_t	reserved;
};

struct mb_mmap {
	uint32_t	size;		/* of the rest of the entry */
	uint32_t	base_lo, base_hi;
	uint32_t	len_lo, len_hi;
	uint32_t	type;		/* 1: usable RAM */
} __attribute__((packed));

extern char _end[];
void guest_main(uint32_t magic, const struct mb_info *mbi)
    __attribute__((noreturn));

static inline void
outb(uint16_t port, uint8_t v)
{
	__asm__ volatile ("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void
outl(uint16_t port, uint32_t v)
{
	__asm__ volatile ("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t
inb(uint16_t port)
{
	uint8_t	v;

	__asm__ volatile ("inb %1, %0" : "=a"(v) : "Nd"(port));
	return (v);
}

static void
serial_init(void)
{
	outb(COM1 + 1, 0x00);		/* no interrupts */
	outb(COM1 + 3, 0x80);		/* DLAB */
	outb(COM1 + 0, 0x01);		/* 115200 baud */
	outb(COM1 + 1, 0x00);
	outb(COM1 + 3, 0x03);		/* 8N1 */
	outb(COM1 + 2, 0xc7);		/* FIFO on, cleared */
}

static void
putch(char c)
{
	int	i;

	for (i = 0; i < 100000 && (inb(COM1 + 5) & 0x20) == 0; i++)
		;
	outb(COM1, (uint8_t)c);
}

static void
puts_(const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\n')
			putch('\r');
		putch(*s);
	}
}

static void
putdec(uint32_t v)
{
	char	buf[11];
	int	i = 0;

	do {
		buf[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (i > 0)
		putch(buf[--i]);
}

static void
puthex(uint32_t v)
{
	int	i;

	puts_("0x");
	for (i = 28; i >= 0; i -= 4)
		putch("0123456789abcdef"[(v >> i) & 0xf]);
}

static void __attribute__((noreturn))
guest_exit(enum guest_exit code)
{
	outl(DEBUG_EXIT, (uint32_t)code);
	/* No isa-debug-exit device: stop here; the caller's timeout ends it. */
	puts_("guest: isa-debug-exit did not stop QEMU\n");
	for (;;)
		__asm__ volatile ("cli; hlt");
}

static uint32_t
c_strlen(const char *s)
{
	uint32_t	n = 0;

	while (s[n] != '\0')
		n++;
	return (n);
}

/* Whether the command line has the word w after the first (the kernel). */
static int
has_word(const struct mb_info *mbi, const char *w)
{
	const char	*p, *q;
	int		 first = 1;

	if ((mbi->flags & MB_INFO_CMDLINE) == 0 || mbi->cmdline == 0)
		return (0);
	for (p = (const char *)mbi->cmdline; *p != '\0'; first = 0) {
		while (*p == ' ')
			p++;
		for (q = w; *q != '\0' && *p == *q; p++, q++)
			;
		if (!first && *q == '\0' && (*p == ' ' || *p == '\0'))
			return (1);
		while (*p != ' ' && *p != '\0')
			p++;
	}
	return (0);
}

/* Touch mode: one word of each page must read zero; then exit. */
static void __attribute__((noreturn))
touch_pages(uint32_t lo, uint32_t hi)
{
	volatile uint32_t	*w;
	uint32_t		 a, v, nonzero = 0;

	for (a = lo; a < hi; a += PAGE) {
		w = (volatile uint32_t *)a;
		if ((v = *w) == 0)
			continue;
		if (nonzero < 8) {
			puts_("guest: non-zero word at ");
			puthex(a);
			puts_(": ");
			puthex(v);
			puts_("\n");
		}
		nonzero++;
	}
	puts_("guest: touched ");
	putdec((hi - lo) / PAGE);
	puts_(" pages, ");
	putdec(nonzero);
	puts_(" non-zero words\n");
	guest_exit(nonzero == 0 ? EXIT_OK : EXIT_NONZERO);
}

/* The first few runs of pages that held non-zero words. */
static void
print_run(uint32_t from, uint32_t to, uint32_t top, uint32_t nth)
{
	if (nth >= 8)
		return;
	puts_("guest: non-zero pages ");
	puthex(from);
	puts_(" - ");
	puthex(to);
	puts_(" (");
	putdec((to - from) / PAGE);
	puts_(" pages, from ");
	putdec((top - from) / 1024);
	puts_(" KiB below the top)\n");
}

/* Raise *lo past [addr, addr + len) if that lies above 1 MiB. */
static void
keep_out(uint32_t *lo, uint32_t addr, uint32_t len)
{
	if (addr >= MIB && addr + len > *lo)
		*lo = addr + len;
}

/* The end of the usable RAM that holds 1 MiB (at most 4 GiB - 4 KiB). */
static uint32_t
ram_top(const struct mb_info *mbi)
{
	const char		*p, *end;
	const struct mb_mmap	*e;
	uint64_t		 base, len, top;

	if (mbi->flags & MB_INFO_MMAP) {
		p = (const char *)mbi->mmap_addr;
		end = p + mbi->mmap_length;
		for (; p < end; p += e->size + 4) {
			e = (const struct mb_mmap *)p;
			base = (uint64_t)e->base_hi << 32 | e->base_lo;
			len = (uint64_t)e->len_hi << 32 | e->len_lo;
			puts_("guest: e820 ");
			puthex((uint32_t)base);
			puts_(" + ");
			puthex((uint32_t)len);
			puts_(" type ");
			putdec(e->type);
			puts_("\n");
			if (e->type != 1 || base > MIB || base + len <= MIB)
				continue;
			top = base + len;
			if (top > 0xfffff000ull)
				top = 0xfffff000ull;
			return ((uint32_t)top);
		}
	}
	if (mbi->flags & MB_INFO_MEM)
		return (MIB + mbi->mem_upper * 1024u);
	return (0);
}

void
guest_main(uint32_t magic, const struct mb_info *mbi)
{
	const struct mb_mod	*mod;
	volatile uint32_t	*w, *wend;
	uint32_t		 top, lo, hi, a, i, v;
	uint32_t		 pages, nonzero, nzpages, bad, run, runs;

	serial_init();
	puts_("guest: hello\n");
	if (magic != MB_BOOT_MAGIC) {
		puts_("guest: not started by a multiboot loader, magic ");
		puthex(magic);
		puts_("\n");
		guest_exit(EXIT_BOOT);
	}
	if ((top = ram_top(mbi)) == 0) {
		puts_("guest: the loader gave no memory information\n");
		guest_exit(EXIT_BOOT);
	}

	/* Below: the image, then what the loader put after it. */
	lo = (uint32_t)_end;
	keep_out(&lo, (uint32_t)mbi, sizeof(*mbi));
	if (mbi->flags & MB_INFO_CMDLINE)
		keep_out(&lo, mbi->cmdline,
		    c_strlen((const char *)mbi->cmdline) + 1);
	if (mbi->flags & MB_INFO_LOADER)
		keep_out(&lo, mbi->boot_loader_name,
		    c_strlen((const char *)mbi->boot_loader_name) + 1);
	if (mbi->flags & MB_INFO_MMAP)
		keep_out(&lo, mbi->mmap_addr, mbi->mmap_length);
	if (mbi->flags & MB_INFO_MODS) {
		keep_out(&lo, mbi->mods_addr,
		    mbi->mods_count * sizeof(struct mb_mod));
		mod = (const struct mb_mod *)mbi->mods_addr;
		for (i = 0; i < mbi->mods_count; i++) {
			keep_out(&lo, mod[i].mod_start,
			    mod[i].mod_end - mod[i].mod_start);
			if (mod[i].string != 0)
				keep_out(&lo, mod[i].string, c_strlen(
				    (const char *)mod[i].string) + 1);
		}
	}
	lo = (lo + PAGE - 1) & ~(PAGE - 1);
	hi = top > TOP_SKIP ? (top - TOP_SKIP) & ~(PAGE - 1) : 0;

	puts_("guest: RAM top ");
	puthex(top);
	puts_(", image end ");
	puthex((uint32_t)_end);
	puts_(", checking ");
	puthex(lo);
	puts_(" - ");
	puthex(hi);
	puts_("\n");
	if (hi <= lo) {
		puts_("guest: nothing to check\n");
		guest_exit(EXIT_RANGE);
	}
	if (has_word(mbi, "touch"))
		touch_pages(lo, hi);
	pages = (hi - lo) / PAGE;

	/* First touch: every word reads zero.  Runs of dirty pages: below. */
	nonzero = nzpages = runs = 0;
	run = 0;
	for (a = lo; a < hi; a += PAGE) {
		w = (volatile uint32_t *)a;
		wend = w + PAGE / 4;
		v = nonzero;
		for (; w < wend; w++) {
			if (*w == 0)
				continue;
			if (nonzero < 8) {
				puts_("guest: non-zero word at ");
				puthex((uint32_t)w);
				puts_(": ");
				puthex(*w);
				puts_("\n");
			}
			nonzero++;
		}
		if (nonzero != v) {
			nzpages++;
			if (run == 0)
				run = a;
		} else if (run != 0) {
			print_run(run, a, top, runs++);
			run = 0;
		}
	}
	if (run != 0)
		print_run(run, hi, top, runs++);
	if (nonzero != 0) {
		puts_("guest: ");
		putdec(nzpages);
		puts_(" pages held non-zero words\n");
	}

	/* Then a pattern in every word, read back after all are written. */
	for (a = lo; a < hi; a += PAGE) {
		w = (volatile uint32_t *)a;
		for (wend = w + PAGE / 4; w < wend; w++)
			*w = (uint32_t)w ^ PATTERN;
	}
	bad = 0;
	for (a = lo; a < hi; a += PAGE) {
		w = (volatile uint32_t *)a;
		for (wend = w + PAGE / 4; w < wend; w++) {
			if (*w == ((uint32_t)w ^ PATTERN))
				continue;
			if (bad < 8) {
				puts_("guest: pattern wrong at ");
				puthex((uint32_t)w);
				puts_(": ");
				puthex(*w);
				puts_("\n");
			}
			bad++;
		}
	}

	puts_("guest: checked ");
	putdec(pages);
	puts_(" pages, ");
	putdec(nonzero);
	puts_(" non-zero words, pattern ");
	if (bad == 0)
		puts_("ok\n");
	else {
		puts_("BAD (");
		putdec(bad);
		puts_(" words)\n");
	}
	if (nonzero != 0)
		guest_exit(EXIT_NONZERO);
	if (bad != 0)
		guest_exit(EXIT_PATTERN);
	guest_exit(EXIT_OK);
}
