/* A KFD client written the way one is written for a real AMD GPU, in C that is also C++: the
 * kernel's own uapi header, plain libc calls, ring contents and doorbells as stores into
 * mapped memory. `hcq exec` must run it unmodified on the emulated GPU (tests/exec.rs).
 *
 * It finds the first GPU in the topology, opens its render node and acquires its VM, allocates
 * GTT and VRAM buffers mapped for the CPU and the GPU, then
 *   - a compute queue runs two RELEASE_MEMs: one writes a signal value, one writes the event id
 *     to the event's mailbox and raises the interrupt that completes a WAIT_EVENTS;
 *   - an SDMA queue copies a GTT buffer into VRAM and back, then FENCEs a signal;
 *   - a second thread reads the GPU's clock counters;
 * and, given a gfx1100 code object (argv[1], built from kfd_kernels.hip),
 *   - loads it and dispatches its kernel on the compute queue with PM4 (SET_SH_REG,
 *     DISPATCH_DIRECT), checking every element on the host;
 *   - dispatches it again on a second compute queue with its output at a page the GPU never
 *     mapped, and reports what the memory-exception event says about the fault;
 * and prints what it saw. Every check failing exits 1 with the reason.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TOPOLOGY "/sys/devices/virtual/kfd/kfd/topology/nodes"

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kfd_client: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
  va_end(ap);
  exit(1);
}

static int kfd = -1, drm = -1;
static uint32_t gpu_id;
static int gpu_node = -1;

static void kioctl(unsigned long request, void *arg, const char *what) {
  int r;
  do {
    r = ioctl(kfd, request, arg);
  } while (r == -1 && (errno == EINTR || errno == EAGAIN));
  if (r != 0) fail("%s failed", what);
}

static long read_number(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

static long property(int node, const char *name) {
  char path[512], key[128];
  long long value;
  snprintf(path, sizeof path, TOPOLOGY "/%d/properties", node);
  FILE *f = fopen(path, "r");
  if (!f) fail("cannot open %s", path);
  long found = -1;
  while (fscanf(f, "%127s %lld", key, &value) == 2)
    if (strcmp(key, name) == 0) found = (long)value;
  fclose(f);
  return found;
}

struct buffer {
  void *cpu;
  uint64_t va, size, handle;
};

static struct buffer alloc(uint64_t size, uint32_t domain) {
  struct buffer b = {0};
  b.size = size;
  /* The GPU virtual address is the CPU one: reserve it first. */
  b.cpu = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (b.cpu == MAP_FAILED) fail("reserving %lu bytes", (unsigned long)size);
  b.va = (uint64_t)(uintptr_t)b.cpu;
  struct kfd_ioctl_alloc_memory_of_gpu_args a = {
      .va_addr = b.va,
      .size = size,
      .gpu_id = gpu_id,
      .flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
               KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE |
               (domain == KFD_IOC_ALLOC_MEM_FLAGS_VRAM ? KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC : 0),
  };
  kioctl(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a, "ALLOC_MEMORY_OF_GPU");
  b.handle = a.handle;
  void *p = mmap(b.cpu, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, drm, a.mmap_offset);
  if (p != b.cpu) fail("mapping the buffer through the render node");
  uint32_t ids[1] = {gpu_id};
  struct kfd_ioctl_map_memory_to_gpu_args m = {
      .handle = b.handle,
      .device_ids_array_ptr = (uint64_t)(uintptr_t)ids,
      .n_devices = 1,
  };
  kioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m, "MAP_MEMORY_TO_GPU");
  if (m.n_success != 1) fail("MAP_MEMORY_TO_GPU mapped on %u GPUs", m.n_success);
  return b;
}

static void release(struct buffer *b) {
  uint32_t ids[1] = {gpu_id};
  struct kfd_ioctl_unmap_memory_from_gpu_args u = {
      .handle = b->handle,
      .device_ids_array_ptr = (uint64_t)(uintptr_t)ids,
      .n_devices = 1,
  };
  kioctl(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &u, "UNMAP_MEMORY_FROM_GPU");
  if (munmap(b->cpu, b->size) != 0) fail("munmap of a buffer");
  struct kfd_ioctl_free_memory_of_gpu_args f = {.handle = b->handle};
  kioctl(AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f, "FREE_MEMORY_OF_GPU");
}

struct queue {
  struct buffer ring, pointers, eop, save;
  uint32_t id;
  volatile uint64_t *doorbell;
  void *doorbell_page;
  uint64_t wptr; /* in dwords for PM4, bytes for SDMA */
  int sdma;
};

/* A gfx11 compute queue's context save area, sized as Linux 6.12 sizes it (kfd_queue.c), which
 * refuses any other size: 32 wave slots per CU, each a 12-byte control-stack entry after a
 * 40-byte header (plus 8 bytes); per CU 0x60000 bytes of VGPRs (gfx1100 and gfx1101; 0x40000 on
 * gfx1102), 0x4000 of SGPRs, 64 KiB of LDS and 0x1000 of registers. The debugger's 32 bytes per
 * wave follow the area in the same buffer, but are not part of its size. */
struct save_sizes {
  uint32_t ctl_stack, area;
  uint64_t buffer;
};

static uint64_t page_align(uint64_t n) { return (n + 0xfff) & ~(uint64_t)0xfff; }

static struct save_sizes save_sizes(void) {
  long target = property(gpu_node, "gfx_target_version");
  long simd_per_cu = property(gpu_node, "simd_per_cu");
  if (target / 10000 != 11 || simd_per_cu <= 0) fail("not a gfx11 GPU: %ld", target);
  uint64_t cus = (uint64_t)(property(gpu_node, "simd_count") / simd_per_cu);
  uint64_t waves = cus * 32;
  uint64_t vgprs = (target == 110000 || target == 110001) ? 0x60000 : 0x40000;
  struct save_sizes s;
  s.ctl_stack = (uint32_t)page_align(40 + waves * 12 + 8);
  s.area = s.ctl_stack + (uint32_t)page_align(cus * (vgprs + 0x4000 + 0x10000 + 0x1000));
  s.buffer = page_align(s.area + waves * 32);
  return s;
}

static struct queue create_queue(int sdma) {
  struct queue q = {0};
  q.sdma = sdma;
  q.ring = alloc(0x1000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  q.pointers = alloc(0x1000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  struct kfd_ioctl_create_queue_args a = {
      .ring_base_address = q.ring.va,
      .write_pointer_address = q.pointers.va,
      .read_pointer_address = q.pointers.va + 8,
      .ring_size = 0x1000,
      .gpu_id = gpu_id,
      .queue_type = (uint32_t)(sdma ? KFD_IOC_QUEUE_TYPE_SDMA : KFD_IOC_QUEUE_TYPE_COMPUTE),
      .queue_percentage = KFD_MAX_QUEUE_PERCENTAGE,
      .queue_priority = KFD_MAX_QUEUE_PRIORITY,
  };
  if (!sdma) {
    /* The end-of-pipe buffer and the context save area a compute queue has on real GPUs. */
    struct save_sizes sizes = save_sizes();
    q.eop = alloc(0x1000, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
    q.save = alloc(sizes.buffer, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
    a.eop_buffer_address = q.eop.va;
    a.eop_buffer_size = 0x1000;
    a.ctx_save_restore_address = q.save.va;
    a.ctx_save_restore_size = sizes.area;
    a.ctl_stack_size = sizes.ctl_stack;
  }
  kioctl(AMDKFD_IOC_CREATE_QUEUE, &a, "CREATE_QUEUE");
  q.id = a.queue_id;
  uint64_t page = a.doorbell_offset & ~(uint64_t)0x1fff;
  q.doorbell_page = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, kfd, page);
  if (q.doorbell_page == MAP_FAILED) fail("mapping the doorbell page");
  q.doorbell = (volatile uint64_t *)((char *)q.doorbell_page + (a.doorbell_offset - page));
  return q;
}

static void submit(struct queue *q, const uint32_t *words, unsigned n) {
  uint32_t *ring = (uint32_t *)q->ring.cpu;
  uint64_t dwords = q->ring.size / 4;
  for (unsigned i = 0; i < n; i++) {
    uint64_t at = q->sdma ? q->wptr / 4 : q->wptr;
    ring[at % dwords] = words[i];
    q->wptr += q->sdma ? 4 : 1;
  }
  __atomic_store_n((uint64_t *)q->pointers.cpu, q->wptr, __ATOMIC_SEQ_CST);
  *q->doorbell = q->wptr; /* a plain store into the doorbell page */
}

static void destroy_queue(struct queue *q) {
  struct kfd_ioctl_destroy_queue_args d = {.queue_id = q->id};
  kioctl(AMDKFD_IOC_DESTROY_QUEUE, &d, "DESTROY_QUEUE");
  munmap(q->doorbell_page, 0x2000);
  release(&q->ring);
  release(&q->pointers);
  if (!q->sdma) {
    release(&q->eop);
    release(&q->save);
  }
}

static uint32_t pm4_header(uint32_t op, uint32_t payload) {
  return (3u << 30) | ((payload - 1) << 16) | (op << 8);
}

/* RELEASE_MEM's cache actions after a kernel: GL2 and the caches above it written back and
 * invalidated, so the host reads what the kernel stored (GLM_WB|GLM_INV|GLV_INV|GL1_INV|
 * GL2_INV|GL2_WB|SEQ). The first signals need none: the GPU wrote nothing before them. */
#define GCR_AFTER_KERNEL 0x70f000u

/* RELEASE_MEM at end of pipe (CACHE_FLUSH_AND_INV_TS): a 32-bit write, then an interrupt. */
static unsigned release_mem(uint32_t *w, uint64_t addr, uint32_t value, uint32_t int_sel,
                            uint32_t int_ctx, uint32_t release_gcr) {
  w[0] = pm4_header(0x49, 7);
  w[1] = 0x14 | (5 << 8) | release_gcr;
  w[2] = (1u << 29) | (int_sel << 24);
  w[3] = (uint32_t)addr;
  w[4] = (uint32_t)(addr >> 32);
  w[5] = value;
  w[6] = 0;
  w[7] = int_ctx;
  return 8;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void wait_value(volatile uint32_t *p, uint32_t value, const char *what) {
  double start = now();
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != value) {
    if (now() - start > 20) fail("timed out waiting for %s", what);
    struct timespec t = {0, 100000};
    nanosleep(&t, NULL);
  }
}

/* A second thread's calls reach the driver as the main thread's do. */
static void *clock_thread(void *arg) {
  struct kfd_ioctl_get_clock_counters_args *c = (struct kfd_ioctl_get_clock_counters_args *)arg;
  c->gpu_id = gpu_id;
  kioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, c, "GET_CLOCK_COUNTERS");
  return NULL;
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) fail("cannot open %s", path);
  if (fseek(f, 0, SEEK_END) != 0) fail("cannot seek in %s", path);
  long n = ftell(f);
  if (n <= 0) fail("%s is empty", path);
  rewind(f);
  void *data = malloc((size_t)n);
  if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) fail("cannot read %s", path);
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* The file is untrusted input: every offset it gives is checked against its size. */
static int in_file(uint64_t offset, uint64_t len, size_t size) {
  return offset <= size && len <= size - offset;
}

/* The symbol `name` from .symtab or .dynsym (a code object has both; either will do). */
static const Elf64_Sym *find_symbol(const uint8_t *file, size_t size, const char *name) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
  if (eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size))
    fail("the code object's section headers are outside the file");
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_link >= eh->e_shnum || !in_file(sh[i].sh_offset, sh[i].sh_size, size))
      fail("symbol table %u is malformed", i);
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    if (!in_file(strtab->sh_offset, strtab->sh_size, size))
      fail("a string table is outside the file");
    const char *names = (const char *)file + strtab->sh_offset;
    const Elf64_Sym *syms = (const Elf64_Sym *)(file + sh[i].sh_offset);
    for (uint64_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); j++) {
      uint32_t at = syms[j].st_name;
      if (at >= strtab->sh_size) continue;
      if (strnlen(names + at, strtab->sh_size - at) < strtab->sh_size - at &&
          strcmp(names + at, name) == 0)
        return &syms[j];
    }
  }
  fail("the code object has no symbol %s", name);
  return NULL;
}

/* What a dispatch of one kernel needs, taken from its code object. */
struct kernel {
  struct buffer image; /* the loadable segments, at their p_vaddr offsets */
  uint64_t code;       /* address of the first instruction */
  uint32_t rsrc1, rsrc2, rsrc3, kernarg_size;
  unsigned kernarg_sgpr; /* the user SGPR (COMPUTE_USER_DATA_n) the kernarg pointer goes in */
  int wave32;
};

static struct kernel load_kernel(const char *path, const char *name) {
  size_t size;
  uint8_t *file = (uint8_t *)read_file(path, &size);
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
      eh->e_machine != EM_AMDGPU)
    fail("%s is not a 64-bit little-endian AMDGPU ELF file", path);
  /* EF_AMDGPU_MACH, the low byte of e_flags: 0x41 is gfx1100. */
  if ((eh->e_flags & 0xff) != 0x41)
    fail("%s is for AMDGPU machine 0x%x, not gfx1100 (0x41)", path, eh->e_flags & 0xff);

  /* Code refers to data by PC-relative offsets fixed at link time, so the segments go at their
   * p_vaddr offsets from one base, not at their file offsets (which differ). */
  if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
      !in_file(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), size))
    fail("the program headers of %s are outside the file", path);
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
  uint64_t span = 0;
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (!in_file(ph[i].p_offset, ph[i].p_filesz, size) || ph[i].p_filesz > ph[i].p_memsz ||
        ph[i].p_vaddr > (1ull << 32) || ph[i].p_memsz > (1ull << 32))
      fail("loadable segment %u of %s is malformed", i, path);
    if (ph[i].p_vaddr + ph[i].p_memsz > span) span = ph[i].p_vaddr + ph[i].p_memsz;
  }
  if (span == 0) fail("%s has no loadable segment", path);
  uint8_t *host = (uint8_t *)calloc(1, span);
  if (!host) fail("allocating %lu bytes for the code object", (unsigned long)span);
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD)
      memcpy(host + ph[i].p_vaddr, file + ph[i].p_offset, ph[i].p_filesz);

  char kd_name[256];
  snprintf(kd_name, sizeof kd_name, "%s.kd", name);
  const Elf64_Sym *kd = find_symbol(file, size, kd_name);
  const Elf64_Sym *entry = find_symbol(file, size, name);
  if (kd->st_size != 64 || span < 64 || kd->st_value > span - 64)
    fail("%s is not a 64-byte kernel descriptor inside the loaded image", kd_name);

  /* The AMDHSA kernel descriptor, by byte offset. */
  const uint8_t *d = host + kd->st_value;
  uint32_t group_segment, private_segment, rsrc[3];
  int64_t entry_offset;
  uint16_t properties;
  memcpy(&group_segment, d + 0, 4);
  memcpy(&private_segment, d + 4, 4);
  struct kernel k = {0};
  memcpy(&k.kernarg_size, d + 8, 4);
  memcpy(&entry_offset, d + 16, 8);
  memcpy(&rsrc[2], d + 44, 4);
  memcpy(&rsrc[0], d + 48, 4);
  memcpy(&rsrc[1], d + 52, 4);
  memcpy(&properties, d + 56, 2);

  /* Scratch needs a scratch buffer and COMPUTE_TMPRING_SIZE; this client sets up none. */
  if (private_segment != 0)
    fail("%s needs %u bytes of scratch per work-item; this client provides none", name,
         private_segment);
  /* The user SGPRs kernel_code_properties enables, in the order the hardware loads them from
   * COMPUTE_USER_DATA_0 on, and how many each takes. Only the kernarg pointer is provided: the
   * others need an AQL packet, a queue descriptor or scratch. */
  static const struct {
    const char *what;
    unsigned sgprs;
  } user_sgprs[] = {{"private segment buffer", 4}, {"dispatch ptr", 2},
                    {"queue ptr", 2},              {"kernarg segment ptr", 2},
                    {"dispatch id", 2},            {"flat scratch init", 2},
                    {"private segment size", 1}};
  unsigned next = 0;
  for (unsigned bit = 0; bit < 7; bit++) {
    if (!(properties & (1u << bit))) continue;
    if (bit != 3)
      fail("%s wants the %s in user SGPRs, which this client does not provide", name,
           user_sgprs[bit].what);
    k.kernarg_sgpr = next;
    next += user_sgprs[bit].sgprs;
  }
  if (!(properties & (1u << 3))) fail("%s takes no kernarg pointer", name);
  /* COMPUTE_PGM_RSRC2.USER_SGPR: how many user SGPRs the hardware loads. */
  if (((rsrc[1] >> 1) & 0x1f) < next)
    fail("%s loads %u user SGPRs, fewer than the %u it enables", name, (rsrc[1] >> 1) & 0x1f, next);
  k.wave32 = (properties >> 10) & 1;
  k.rsrc1 = rsrc[0];
  /* LDS_SIZE (bits 15..23) is the command processor's to fill in: 512-byte granules on gfx11. */
  k.rsrc2 = rsrc[1] | (((group_segment + 511) / 512) << 15);
  k.rsrc3 = rsrc[2];

  k.image = alloc((span + 0xfff) & ~(uint64_t)0xfff, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
  memcpy(k.image.cpu, host, span);
  k.code = k.image.va + kd->st_value + (uint64_t)entry_offset;
  if (k.code != k.image.va + entry->st_value)
    fail("%s's descriptor points at 0x%lx, not at the symbol %s", kd_name,
         (unsigned long)(k.code - k.image.va), name);
  /* COMPUTE_PGM_LO/HI hold the address in 256-byte units. */
  if (k.code & 0xff) fail("%s's code is not 256-byte aligned", name);
  free(host);
  free(file);
  return k;
}

static unsigned set_sh_reg(uint32_t *w, uint32_t reg, const uint32_t *values, unsigned n) {
  w[0] = pm4_header(0x76, n + 1);
  w[1] = reg - 0x2c00; /* SET_SH_REG counts in dwords from the start of the SH registers */
  memcpy(w + 2, values, n * 4);
  return n + 2;
}

/* One dispatch of `groups` workgroups of `block` work-items; 1-D. */
static unsigned dispatch(uint32_t *w, const struct kernel *k, uint64_t kernargs, uint32_t block,
                         uint32_t groups) {
  unsigned n = 0;
  /* The CPU wrote the code and the arguments: an HDP flush makes its writes through the PCIe
   * BAR visible (WAIT_REG_MEM writing every client's bit to GPU_HDP_FLUSH_REQ and polling
   * GPU_HDP_FLUSH_DONE for them: NBIO 4.3's registers 0x106/0x107 in its segment 2, whose base
   * is dword 0xd20), then ACQUIRE_MEM drops whatever the instruction, scalar, vector, GL1 and
   * GL2 caches hold of the whole address space. */
  w[n++] = pm4_header(0x3c, 6);
  w[n++] = 3 | (1 << 6); /* function "equal", operation "write, then wait", register space */
  w[n++] = 0xd20 + 0x106;
  w[n++] = 0xd20 + 0x107;
  w[n++] = 0xffffffff;
  w[n++] = 0xffffffff;
  w[n++] = 0x20;
  w[n++] = pm4_header(0x58, 7);
  w[n++] = 0;
  w[n++] = 0xffffffff; /* size in 256-byte units, 40 bits: everything */
  w[n++] = 0xff;
  w[n++] = 0; /* base */
  w[n++] = 0;
  w[n++] = 0;
  w[n++] = 0x4381; /* GCR_CNTL: GLI_INV | GLK_INV | GLV_INV | GL1_INV | GL2_INV */

  uint32_t pgm[2] = {(uint32_t)(k->code >> 8), (uint32_t)(k->code >> 40)};
  n += set_sh_reg(w + n, 0x2e0c, pgm, 2); /* COMPUTE_PGM_LO, _HI */
  uint32_t rsrc12[2] = {k->rsrc1, k->rsrc2};
  n += set_sh_reg(w + n, 0x2e12, rsrc12, 2); /* COMPUTE_PGM_RSRC1, _RSRC2 */
  n += set_sh_reg(w + n, 0x2e28, &k->rsrc3, 1); /* COMPUTE_PGM_RSRC3 (gfx11's offset) */
  uint32_t zero = 0;
  n += set_sh_reg(w + n, 0x2e18, &zero, 1); /* COMPUTE_TMPRING_SIZE: no scratch */
  uint32_t kernarg_ptr[2] = {(uint32_t)kernargs, (uint32_t)(kernargs >> 32)};
  n += set_sh_reg(w + n, 0x2e40 + k->kernarg_sgpr, kernarg_ptr, 2); /* COMPUTE_USER_DATA_n */
  uint32_t start_and_size[6] = {0, 0, 0, block, 1, 1};
  n += set_sh_reg(w + n, 0x2e04, start_and_size, 6); /* COMPUTE_START_X..NUM_THREAD_Z */
  n += set_sh_reg(w + n, 0x2e15, &zero, 1);          /* COMPUTE_RESOURCE_LIMITS */
  w[n++] = pm4_header(0x15, 4);                       /* DISPATCH_DIRECT, in workgroups */
  w[n++] = groups;
  w[n++] = 1;
  w[n++] = 1;
  w[n++] = 1u | (k->wave32 ? 1u << 15 : 0); /* COMPUTE_SHADER_EN, CS_W32_EN */
  return n;
}

/* scale_add's arguments: y, x, a, b, n, block at offsets 0, 8, 16, 20, 24, 28. */
static struct buffer kernel_arguments(const struct kernel *k, uint64_t y, uint64_t x, float a,
                                      float b, uint32_t count, uint32_t block) {
  if (k->kernarg_size < 32) fail("scale_add takes %u bytes of arguments, not 32", k->kernarg_size);
  struct buffer args = alloc((k->kernarg_size + 0xfff) & ~0xfffu, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  uint8_t *p = (uint8_t *)args.cpu;
  memset(p, 0, args.size);
  memcpy(p + 0, &y, 8);
  memcpy(p + 8, &x, 8);
  memcpy(p + 16, &a, 4);
  memcpy(p + 20, &b, 4);
  memcpy(p + 24, &count, 4);
  memcpy(p + 28, &block, 4);
  return args;
}

int main(int argc, char **argv) {
  kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
  if (kfd < 0) fail("cannot open /dev/kfd");
  struct kfd_ioctl_get_version_args v = {0};
  kioctl(AMDKFD_IOC_GET_VERSION, &v, "GET_VERSION");
  struct kfd_ioctl_get_version_args raw = {0};
  if (syscall(SYS_ioctl, kfd, AMDKFD_IOC_GET_VERSION, &raw) != 0) fail("raw GET_VERSION");
  if (v.major_version != 1 || raw.major_version != v.major_version ||
      raw.minor_version != v.minor_version)
    fail("versions %u.%u and %u.%u", v.major_version, v.minor_version, raw.major_version,
         raw.minor_version);
  printf("kfd %u.%u\n", v.major_version, v.minor_version);
  /* The kernel copies arguments with copy_{from,to}_user: a bad pointer is EFAULT. */
  if (ioctl(kfd, AMDKFD_IOC_GET_VERSION, (void *)16) != -1 || errno != EFAULT)
    fail("GET_VERSION with a bad pointer did not fail with EFAULT");

  /* The first node with a GPU, in node order. */
  int node = -1, gpus = 0;
  DIR *d = opendir(TOPOLOGY);
  if (!d) fail("cannot list " TOPOLOGY);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, TOPOLOGY "/%s/gpu_id", e->d_name);
    long id = read_number(path);
    if (id > 0) {
      gpus++;
      int n = atoi(e->d_name);
      if (node < 0 || n < node) node = n;
    }
  }
  closedir(d);
  if (node < 0) fail("no GPU in the topology");
  char path[512];
  snprintf(path, sizeof path, TOPOLOGY "/%d/gpu_id", node);
  gpu_id = (uint32_t)read_number(path);
  gpu_node = node;
  long target = property(node, "gfx_target_version");
  long minor = property(node, "drm_render_minor");
  printf("gpus %d node %d gfx_target_version %ld render_minor %ld\n", gpus, node, target, minor);

  snprintf(path, sizeof path, "/dev/dri/renderD%ld", minor);
  drm = open(path, O_RDWR | O_CLOEXEC);
  if (drm < 0) fail("cannot open %s", path);
  struct kfd_ioctl_acquire_vm_args vm = {.drm_fd = (uint32_t)drm, .gpu_id = gpu_id};
  kioctl(AMDKFD_IOC_ACQUIRE_VM, &vm, "ACQUIRE_VM");

  struct kfd_ioctl_get_clock_counters_args clocks = {0};
  pthread_t thread;
  if (pthread_create(&thread, NULL, clock_thread, &clocks) != 0) fail("pthread_create");
  pthread_join(thread, NULL);
  if (clocks.gpu_clock_counter == 0 || clocks.system_clock_freq == 0)
    fail("clock counters from a thread: gpu %llu, system frequency %llu",
         (unsigned long long)clocks.gpu_clock_counter,
         (unsigned long long)clocks.system_clock_freq);
  printf("thread clock ok\n");

  /* Signals: a page of 64-byte slots; events: a page of 8-byte mailboxes. */
  struct buffer signals = alloc(0x1000, KFD_IOC_ALLOC_MEM_FLAGS_GTT |
                                            KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
                                            KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED);
  struct buffer events = alloc(0x8000, KFD_IOC_ALLOC_MEM_FLAGS_GTT |
                                           KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
                                           KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED);
  struct kfd_ioctl_create_event_args ev = {
      .event_page_offset = events.handle,
      .event_type = KFD_IOC_EVENT_SIGNAL,
      .auto_reset = 1,
  };
  kioctl(AMDKFD_IOC_CREATE_EVENT, &ev, "CREATE_EVENT");
  uint64_t mailbox = events.va + 8 * (uint64_t)ev.event_slot_index;

  /* Compute queue: RELEASE_MEM writes 7, then the event's mailbox with an interrupt. */
  struct queue compute = create_queue(0);
  uint32_t words[128];
  unsigned n = release_mem(words, signals.va + 8, 7, 0, 0, 0);
  n += release_mem(words + n, mailbox, ev.event_id, 2, ev.event_id, 0);
  submit(&compute, words, n);
  struct kfd_event_data data = {.event_id = ev.event_id};
  struct kfd_ioctl_wait_events_args w = {
      .events_ptr = (uint64_t)(uintptr_t)&data,
      .num_events = 1,
      .wait_for_all = 1,
      .timeout = 20000,
  };
  kioctl(AMDKFD_IOC_WAIT_EVENTS, &w, "WAIT_EVENTS");
  /* A bad pointer inside an argument is EFAULT too (copy_from_user of the event array). */
  struct kfd_ioctl_wait_events_args bad_wait = w;
  bad_wait.events_ptr = 16;
  bad_wait.timeout = 0;
  if (ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &bad_wait) != -1 || errno != EFAULT)
    fail("WAIT_EVENTS with a bad event array did not fail with EFAULT");
  volatile uint32_t *signal = (volatile uint32_t *)((char *)signals.cpu + 8);
  printf("wait_result %u signal %u\n", w.wait_result, *signal);
  if (w.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE || *signal != 7) fail("compute signal");

  /* SDMA: GTT -> VRAM -> GTT, then a FENCE. */
  enum { BYTES = 3 * 4096 + 100 };
  struct buffer src = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  struct buffer vram = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
  struct buffer back = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  uint8_t *s = (uint8_t *)src.cpu;
  for (unsigned i = 0; i < BYTES; i++) s[i] = (uint8_t)(i * 7 + 3);
  memset(back.cpu, 0xee, 0x4000);
  struct queue copy = create_queue(1);
  uint64_t copies[2][2] = {{vram.va, src.va}, {back.va, vram.va}};
  n = 0;
  for (int i = 0; i < 2; i++) {
    words[n++] = 1;         /* COPY, LINEAR */
    words[n++] = BYTES - 1; /* count: bytes - 1 */
    words[n++] = 0;
    words[n++] = (uint32_t)copies[i][1];
    words[n++] = (uint32_t)(copies[i][1] >> 32);
    words[n++] = (uint32_t)copies[i][0];
    words[n++] = (uint32_t)(copies[i][0] >> 32);
  }
  words[n++] = 5; /* FENCE */
  words[n++] = (uint32_t)(signals.va + 64 + 8);
  words[n++] = (uint32_t)((signals.va + 64 + 8) >> 32);
  words[n++] = 0x5d3a;
  submit(&copy, words, n);
  wait_value((volatile uint32_t *)((char *)signals.cpu + 64 + 8), 0x5d3a, "the SDMA fence");
  const uint8_t *b = (const uint8_t *)back.cpu;
  for (unsigned i = 0; i < 0x4000; i++) {
    uint8_t want = i < BYTES ? (uint8_t)(i * 7 + 3) : 0xee;
    if (b[i] != want) fail("byte %u after the copies is %u, not %u", i, b[i], want);
  }
  printf("sdma copied %d bytes\n", BYTES);

  if (argc > 1) {
    /* y = 2.5 x + 1 over a length that is not a multiple of the workgroup size. a * x is
     * exact in float for these x, so a fused multiply-add and the host's separate multiply
     * and add agree to the bit. */
    enum { COUNT = 1000, BLOCK = 64, GROUPS = (COUNT + BLOCK - 1) / BLOCK };
    const float a = 2.5f, b = 1.0f, untouched = -7.0f;
    struct kernel k = load_kernel(argv[1], "scale_add");
    struct buffer x = alloc(GROUPS * BLOCK * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    struct buffer y = alloc(GROUPS * BLOCK * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    float *xs = (float *)x.cpu, *ys = (float *)y.cpu;
    for (unsigned i = 0; i < GROUPS * BLOCK; i++) {
      xs[i] = (float)i;
      ys[i] = untouched;
    }
    struct buffer args = kernel_arguments(&k, y.va, x.va, a, b, COUNT, BLOCK);
    n = dispatch(words, &k, args.va, BLOCK, GROUPS);
    n += release_mem(words + n, signals.va + 128 + 8, 1, 0, 0, GCR_AFTER_KERNEL);
    n += release_mem(words + n, mailbox, ev.event_id, 2, ev.event_id, 0);
    submit(&compute, words, n);
    w.wait_result = 0;
    kioctl(AMDKFD_IOC_WAIT_EVENTS, &w, "WAIT_EVENTS after the dispatch");
    if (w.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE) fail("the dispatch did not complete");
    wait_value((volatile uint32_t *)((char *)signals.cpu + 128 + 8), 1, "the dispatch's signal");
    for (unsigned i = 0; i < GROUPS * BLOCK; i++) {
      float want = i < COUNT ? a * (float)i + b : untouched;
      if (ys[i] != want) fail("y[%u] is %g, not %g", i, ys[i], want);
    }
    printf("dispatch scale_add %d elements ok\n", COUNT);

    /* The same kernel storing to a page that is reserved in the process but was never
     * allocated or mapped on the GPU: a GPU page fault, which KFD reports through the memory
     * event (and stops the queue), not through the queue's signal. */
    struct kfd_ioctl_create_event_args memory_ev = {.event_type = KFD_IOC_EVENT_MEMORY,
                                                    .auto_reset = 1};
    kioctl(AMDKFD_IOC_CREATE_EVENT, &memory_ev, "CREATE_EVENT (memory)");
    struct kfd_ioctl_create_event_args hw_ev = {.event_type = KFD_IOC_EVENT_HW_EXCEPTION,
                                                .auto_reset = 1};
    kioctl(AMDKFD_IOC_CREATE_EVENT, &hw_ev, "CREATE_EVENT (hardware exception)");
    void *hole = mmap(NULL, 0x1000, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (hole == MAP_FAILED) fail("reserving a page");
    uint64_t hole_va = (uint64_t)(uintptr_t)hole;
    struct buffer bad_args = kernel_arguments(&k, hole_va, x.va, a, b, COUNT, BLOCK);
    struct queue doomed = create_queue(0);
    n = dispatch(words, &k, bad_args.va, BLOCK, GROUPS);
    n += release_mem(words + n, signals.va + 192 + 8, 1, 0, 0, GCR_AFTER_KERNEL);
    n += release_mem(words + n, mailbox, ev.event_id, 2, ev.event_id, 0);
    submit(&doomed, words, n);
    struct kfd_event_data fault[3] = {
        {.event_id = ev.event_id}, {.event_id = memory_ev.event_id}, {.event_id = hw_ev.event_id}};
    struct kfd_ioctl_wait_events_args any = {
        .events_ptr = (uint64_t)(uintptr_t)fault,
        .num_events = 3,
        .wait_for_all = 0,
        .timeout = 10000,
    };
    kioctl(AMDKFD_IOC_WAIT_EVENTS, &any, "WAIT_EVENTS for the fault");
    /* KFD fills in the exception data of the exception events that fired. */
    const struct kfd_hsa_memory_exception_data *m = &fault[1].memory_exception_data;
    const struct kfd_hsa_hw_exception_data *h = &fault[2].hw_exception_data;
    if (any.wait_result == KFD_IOC_WAIT_RESULT_TIMEOUT) {
      printf("fault: no event fired within 10 s\n");
    } else if (m->gpu_id == 0) {
      printf("fault: WAIT_EVENTS returned %u without memory exception data\n", any.wait_result);
    } else {
      printf("fault va %s reported by the memory event: gpu %s, not_present %u read_only %u "
             "no_execute %u imprecise %u\n",
             (m->va & ~(uint64_t)0xfff) == hole_va ? "in the unmapped page" : "elsewhere",
             m->gpu_id == gpu_id ? "ok" : "wrong", m->failure.NotPresent, m->failure.ReadOnly,
             m->failure.NoExecute, m->failure.imprecise);
    }
    if (h->gpu_id != 0)
      printf("fault also reported by the hardware exception event: reset_type %u cause %u\n",
             h->reset_type, h->reset_cause);
    /* KFD evicts every queue the process has on the GPU at a VM fault and never restores
     * them: the faulted queue's signal never comes, and a queue created afterwards is created
     * but never runs. They can only be destroyed. */
    struct queue late = create_queue(0);
    n = release_mem(words, signals.va + 256 + 8, 1, 0, 0, 0);
    submit(&late, words, n);
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    volatile uint32_t *after_fault = (volatile uint32_t *)((char *)signals.cpu + 192 + 8);
    volatile uint32_t *late_signal = (volatile uint32_t *)((char *)signals.cpu + 256 + 8);
    printf("after the fault: faulted queue %s, new queue %s\n",
           *after_fault == 0 ? "stopped" : "went on", *late_signal == 0 ? "stopped" : "ran");
    destroy_queue(&late);
    destroy_queue(&doomed);

    struct kfd_ioctl_destroy_event_args dm = {.event_id = memory_ev.event_id};
    kioctl(AMDKFD_IOC_DESTROY_EVENT, &dm, "DESTROY_EVENT (memory)");
    struct kfd_ioctl_destroy_event_args dh = {.event_id = hw_ev.event_id};
    kioctl(AMDKFD_IOC_DESTROY_EVENT, &dh, "DESTROY_EVENT (hardware exception)");
    munmap(hole, 0x1000);
    struct buffer *used[] = {&bad_args, &args, &x, &y, &k.image};
    for (unsigned i = 0; i < sizeof used / sizeof used[0]; i++) release(used[i]);
  }

  destroy_queue(&compute);
  destroy_queue(&copy);
  struct kfd_ioctl_destroy_event_args de = {.event_id = ev.event_id};
  kioctl(AMDKFD_IOC_DESTROY_EVENT, &de, "DESTROY_EVENT");
  /* The event page stays: KFD refuses to free it (EPERM) while the process lives. */
  struct kfd_ioctl_free_memory_of_gpu_args f = {.handle = events.handle};
  if (ioctl(kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f) != -1 || errno != EPERM)
    fail("freeing the event page was not refused with EPERM");
  struct buffer *all[] = {&signals, &src, &vram, &back};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
  close(drm);
  close(kfd);
  printf("done\n");
  return 0;
}
