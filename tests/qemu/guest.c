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
 * exits at once: no pattern pass.  tests/tools/vmstart.sh times that.
 *
 * With "wait" (vmm.sh, libvirt.sh) it checks and fills the lower half of
 * the range only, says so, and rewrites a word of each of those pages (so
 * that a migration always has dirty pages to send) until a byte comes in
 * on COM1; then every word of the lower half must hold the pattern and
 * every word of the upper half, never touched, must read zero.
 *
 * With "balloon" (vmm.sh) it fills the lower half likewise, then drives
 * the legacy virtio-balloon PCI device: once the host asks for
 * BALLOON_PAGES 4 KiB pages (QMP balloon) it gives back 8 MiB of the
 * filled half and 8 MiB of the untouched half, whole 2 MiB pages, and when
 * the host gives them back (balloon to the full size) it takes them again.
 * The pages given back must read zero, the rest of the lower half must
 * still hold the pattern, the rest of the upper half zero.
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
	EXIT_DEVICE = 5,	/* no virtio-balloon, or it misbehaved: 11 */
	EXIT_STALE = 6,		/* a page given back kept old bytes: 13 */
};

#define HUGE		(2u * MIB)
#define BALLOON_CHUNK	(8u * MIB)	/* given back from each half */
#define BALLOON_PAGES	(2u * BALLOON_CHUNK / PAGE)
#define POLL_MAX	100000000u	/* "the device never answered" */

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

static inline void
outw(uint16_t port, uint16_t v)
{
	__asm__ volatile ("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint16_t
inw(uint16_t port)
{
	uint16_t	v;

	__asm__ volatile ("inw %1, %0" : "=a"(v) : "Nd"(port));
	return (v);
}

static inline uint32_t
inl(uint16_t port)
{
	uint32_t	v;

	__asm__ volatile ("inl %1, %0" : "=a"(v) : "Nd"(port));
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

/*
 * Words of [lo, hi), one every step bytes, that do not hold what they
 * must: 0, or with patterned the pattern (a ^ PATTERN).  The first 8 are
 * shown, named by what.
 */
static uint32_t
count_wrong(uint32_t lo, uint32_t hi, uint32_t step, int patterned,
    const char *what)
{
	volatile uint32_t	*w;
	uint32_t		 a, v, n = 0;

	for (a = lo; a < hi; a += step) {
		w = (volatile uint32_t *)a;
		if ((v = *w) == (patterned ? (a ^ PATTERN) : 0))
			continue;
		if (n < 8) {
			puts_("guest: ");
			puts_(what);
			puts_(patterned ? ": pattern wrong at " :
			    ": non-zero word at ");
			puthex(a);
			puts_(": ");
			puthex(v);
			puts_("\n");
		}
		n++;
	}
	return (n);
}

/* Touch mode: one word of each page must read zero; then exit. */
static void __attribute__((noreturn))
touch_pages(uint32_t lo, uint32_t hi)
{
	uint32_t	nonzero = count_wrong(lo, hi, PAGE, 0, "touch");

	puts_("guest: touched ");
	putdec((hi - lo) / PAGE);
	puts_(" pages, ");
	putdec(nonzero);
	puts_(" non-zero words\n");
	guest_exit(nonzero == 0 ? EXIT_OK : EXIT_NONZERO);
}

static void
fill(uint32_t lo, uint32_t hi)
{
	uint32_t	a;

	for (a = lo; a < hi; a += 4)
		*(volatile uint32_t *)a = a ^ PATTERN;
}

/* The lower half's end: a 2 MiB boundary, so whole pages go to each. */
static uint32_t
half(uint32_t lo, uint32_t hi)
{
	return ((lo + (hi - lo) / 2 + HUGE - 1) & ~(HUGE - 1));
}

/* Check and fill [lo, mid): 0 if it read zero and then kept the pattern. */
static uint32_t
fill_half(uint32_t lo, uint32_t mid)
{
	uint32_t	nonzero, bad;

	nonzero = count_wrong(lo, mid, 4, 0, "first touch");
	fill(lo, mid);
	bad = count_wrong(lo, mid, 4, 1, "filled");
	puts_("guest: filled ");
	putdec((mid - lo) / PAGE);
	puts_(" pages, ");
	putdec(nonzero);
	puts_(" non-zero words, pattern ");
	puts_(bad == 0 ? "ok" : "BAD");
	puts_("\n");
	if (nonzero != 0)
		guest_exit(EXIT_NONZERO);
	if (bad != 0)
		guest_exit(EXIT_PATTERN);
	return (0);
}

static int
serial_ready(void)
{
	return (inb(COM1 + 5) & 0x01);
}

/* Wait mode: dirty the lower half until a byte comes; then check both. */
static void __attribute__((noreturn))
wait_mode(uint32_t lo, uint32_t hi)
{
	uint32_t	mid = half(lo, hi), a, passes = 0, bad, nonzero;

	fill_half(lo, mid);
	puts_("guest: waiting for a byte on COM1\n");
	while (!serial_ready()) {
		for (a = lo; a < mid; a += PAGE) {
			*(volatile uint32_t *)a = a ^ PATTERN;
			if ((a & (64 * PAGE - 1)) == 0 && serial_ready())
				break;
		}
		passes++;
	}
	(void)inb(COM1);
	puts_("guest: woke after ");
	putdec(passes);
	puts_(" passes\n");
	bad = count_wrong(lo, mid, 4, 1, "after the wait");
	nonzero = count_wrong(mid, hi, 4, 0, "never written");
	puts_("guest: after the wait: ");
	putdec((mid - lo) / PAGE);
	puts_(" pages, ");
	putdec(bad);
	puts_(" words without the pattern; ");
	putdec((hi - mid) / PAGE);
	puts_(" pages never written, ");
	putdec(nonzero);
	puts_(" non-zero words\n");
	if (bad != 0)
		guest_exit(EXIT_PATTERN);
	guest_exit(nonzero != 0 ? EXIT_NONZERO : EXIT_OK);
}

/* --- a legacy virtio-balloon PCI device, polled ----------------------- */

#define PCI_ADDR		0xcf8
#define PCI_DATA		0xcfc
#define VIRTIO_VENDOR		0x1af4
#define VIRTIO_BALLOON_LEGACY	0x1002
/* Legacy virtio header in BAR 0 (no MSI-X), then the balloon's config. */
#define VIO_GUEST_FEATURES	4
#define VIO_QUEUE_PFN		8
#define VIO_QUEUE_NUM		12
#define VIO_QUEUE_SEL		14
#define VIO_QUEUE_NOTIFY	16
#define VIO_STATUS		18
#define VIO_NUM_PAGES		20
#define VIO_ACTUAL		24
#define VQ_MAX			256

struct vring_desc {
	uint32_t	addr_lo, addr_hi;
	uint32_t	len;
	uint16_t	flags, next;
};

struct vq {
	uint16_t			 num, last_used;
	volatile struct vring_desc	*desc;
	volatile uint16_t		*avail;	/* flags, idx, ring[] */
	volatile uint16_t		*used;	/* flags, idx, {id, len}[] */
};

static uint8_t	vq_mem[2][4 * PAGE] __attribute__((aligned(4096)));
static uint32_t	balloon_pfns[BALLOON_PAGES] __attribute__((aligned(4096)));

static uint32_t
pci_read(uint32_t bdf, uint32_t reg)
{
	outl(PCI_ADDR, 0x80000000u | bdf << 8 | (reg & 0xfc));
	return (inl(PCI_DATA));
}

static void
pci_write(uint32_t bdf, uint32_t reg, uint32_t v)
{
	outl(PCI_ADDR, 0x80000000u | bdf << 8 | (reg & 0xfc));
	outl(PCI_DATA, v);
}

/* The balloon's I/O base on bus 0, with I/O and bus mastering on; or 0. */
static uint16_t
balloon_find(void)
{
	uint32_t	bdf, id, bar;

	for (bdf = 0; bdf < 32 * 8; bdf++) {
		id = pci_read(bdf, 0);
		if ((id & 0xffff) != VIRTIO_VENDOR ||
		    id >> 16 != VIRTIO_BALLOON_LEGACY)
			continue;
		bar = pci_read(bdf, 0x10);
		if ((bar & 1) == 0)
			return (0);
		pci_write(bdf, 4, (pci_read(bdf, 4) & 0xffff) | 0x5);
		return ((uint16_t)(bar & ~3u));
	}
	return (0);
}

static int
vq_setup(struct vq *q, uint16_t io, uint16_t index)
{
	uint32_t	base = (uint32_t)vq_mem[index], i, used;

	outw(io + VIO_QUEUE_SEL, index);
	q->num = inw(io + VIO_QUEUE_NUM);
	if (q->num == 0 || q->num > VQ_MAX)
		return (-1);
	for (i = 0; i < sizeof(vq_mem[0]); i++)
		vq_mem[index][i] = 0;
	used = (base + 16u * q->num + 6u + 2u * q->num + PAGE - 1) &
	    ~(PAGE - 1);
	q->desc = (volatile struct vring_desc *)base;
	q->avail = (volatile uint16_t *)(base + 16u * q->num);
	q->used = (volatile uint16_t *)used;
	q->last_used = 0;
	outl(io + VIO_QUEUE_PFN, base / PAGE);
	return (0);
}

/* One buffer for the device to read; 0 once it says it is done. */
static int
vq_send(struct vq *q, uint16_t io, uint16_t index, const void *buf,
    uint32_t len)
{
	uint32_t	i;
	uint16_t	idx;

	q->desc[0].addr_lo = (uint32_t)buf;
	q->desc[0].addr_hi = 0;
	q->desc[0].len = len;
	q->desc[0].flags = 0;
	q->desc[0].next = 0;
	idx = q->avail[1];
	q->avail[2 + idx % q->num] = 0;
	__sync_synchronize();
	q->avail[1] = (uint16_t)(idx + 1);
	__sync_synchronize();
	outw(io + VIO_QUEUE_NOTIFY, index);
	for (i = 0; i < POLL_MAX && q->used[1] == q->last_used; i++)
		;
	if (q->used[1] == q->last_used)
		return (-1);
	q->last_used++;
	return (0);
}

/*
 * Balloon mode: fill the lower half; give back a chunk of each half when
 * the host asks, take them back when it lets go; then every byte must be
 * right: zero in what was given back, the pattern in the rest of the
 * lower half, zero in the rest of the upper half.
 */
static void __attribute__((noreturn))
balloon_mode(uint32_t lo, uint32_t hi)
{
	struct vq	inflate, deflate;
	uint32_t	mid = half(lo, hi), a, b, i, stale, bad, nonzero;
	uint16_t	io;

	a = (lo + HUGE - 1) & ~(HUGE - 1);
	b = mid;
	if (a + BALLOON_CHUNK > mid || b + BALLOON_CHUNK > hi) {
		puts_("guest: too little RAM for the balloon chunks\n");
		guest_exit(EXIT_RANGE);
	}
	fill_half(lo, mid);
	if ((io = balloon_find()) == 0) {
		puts_("guest: no legacy virtio-balloon PCI device\n");
		guest_exit(EXIT_DEVICE);
	}
	outb(io + VIO_STATUS, 0);		/* reset */
	outb(io + VIO_STATUS, 1 | 2);		/* acknowledge, driver */
	outl(io + VIO_GUEST_FEATURES, 0);
	if (vq_setup(&inflate, io, 0) != 0 || vq_setup(&deflate, io, 1) != 0) {
		puts_("guest: balloon queues unusable\n");
		guest_exit(EXIT_DEVICE);
	}
	outb(io + VIO_STATUS, 1 | 2 | 4);	/* driver ok */
	for (i = 0; i < BALLOON_PAGES / 2; i++) {
		balloon_pfns[i] = a / PAGE + i;
		balloon_pfns[BALLOON_PAGES / 2 + i] = b / PAGE + i;
	}
	puts_("guest: balloon ready at io ");
	puthex(io);
	puts_("; waiting for the host to ask for ");
	putdec(BALLOON_PAGES);
	puts_(" pages\n");
	while (inl(io + VIO_NUM_PAGES) < BALLOON_PAGES)
		;
	if (vq_send(&inflate, io, 0, balloon_pfns, sizeof(balloon_pfns)) != 0) {
		puts_("guest: the balloon did not take the pages\n");
		guest_exit(EXIT_DEVICE);
	}
	outl(io + VIO_ACTUAL, BALLOON_PAGES);
	puts_("guest: gave back 8 MiB at ");
	puthex(a);
	puts_(" (filled) and 8 MiB at ");
	puthex(b);
	puts_(" (never written)\n");
	while (inl(io + VIO_NUM_PAGES) != 0)
		;
	if (vq_send(&deflate, io, 1, balloon_pfns, sizeof(balloon_pfns)) != 0) {
		puts_("guest: the balloon did not give the pages back\n");
		guest_exit(EXIT_DEVICE);
	}
	outl(io + VIO_ACTUAL, 0);
	puts_("guest: took them back\n");

	stale = count_wrong(a, a + BALLOON_CHUNK, 4, 0, "given back (filled)");
	stale += count_wrong(b, b + BALLOON_CHUNK, 4, 0, "given back (unwritten)");
	bad = count_wrong(lo, a, 4, 1, "kept") +
	    count_wrong(a + BALLOON_CHUNK, mid, 4, 1, "kept");
	nonzero = count_wrong(b + BALLOON_CHUNK, hi, 4, 0, "never written");
	/* Reused: written and read back. */
	fill(a, a + BALLOON_CHUNK);
	fill(b, b + BALLOON_CHUNK);
	bad += count_wrong(a, a + BALLOON_CHUNK, 4, 1, "reused") +
	    count_wrong(b, b + BALLOON_CHUNK, 4, 1, "reused");
	puts_("guest: after the balloon: ");
	putdec(stale);
	puts_(" non-zero words given back, ");
	putdec(bad);
	puts_(" words without the pattern, ");
	putdec(nonzero);
	puts_(" non-zero words never written\n");
	if (stale != 0)
		guest_exit(EXIT_STALE);
	if (bad != 0)
		guest_exit(EXIT_PATTERN);
	guest_exit(nonzero != 0 ? EXIT_NONZERO : EXIT_OK);
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
	if (has_word(mbi, "wait"))
		wait_mode(lo, hi);
	if (has_word(mbi, "balloon"))
		balloon_mode(lo, hi);
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
