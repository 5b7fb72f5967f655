/* A KFD client written the way one is written for a real AMD GPU: the kernel's own uapi header,
 * plain libc calls, ring contents and doorbells as stores into mapped memory. `hcq exec` must
 * run it unmodified on the emulated GPU (tests/exec.rs).
 *
 * It finds the first GPU in the topology, opens its render node and acquires its VM, allocates
 * GTT and VRAM buffers mapped for the CPU and the GPU, then
 *   - a compute queue runs two RELEASE_MEMs: one writes a signal value, one writes the event id
 *     to the event's mailbox and raises the interrupt that completes a WAIT_EVENTS;
 *   - an SDMA queue copies a GTT buffer into VRAM and back, then FENCEs a signal;
 *   - a second thread reads the GPU's clock counters;
 * and prints what it saw. Every check failing exits 1 with the reason.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
      .queue_type = sdma ? KFD_IOC_QUEUE_TYPE_SDMA : KFD_IOC_QUEUE_TYPE_COMPUTE,
      .queue_percentage = KFD_MAX_QUEUE_PERCENTAGE,
      .queue_priority = KFD_MAX_QUEUE_PRIORITY,
  };
  if (!sdma) {
    /* The end-of-pipe buffer and the context save area a compute queue has on real GPUs. */
    q.eop = alloc(0x1000, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
    q.save = alloc(0x2C02000, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
    a.eop_buffer_address = q.eop.va;
    a.eop_buffer_size = 0x1000;
    a.ctx_save_restore_address = q.save.va;
    a.ctx_save_restore_size = 0x2C02000;
    a.ctl_stack_size = 0xa000;
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
  uint32_t *ring = q->ring.cpu;
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

/* RELEASE_MEM at end of pipe (CACHE_FLUSH_AND_INV_TS): a 32-bit write, then an interrupt. */
static unsigned release_mem(uint32_t *w, uint64_t addr, uint32_t value, uint32_t int_sel,
                            uint32_t int_ctx) {
  w[0] = pm4_header(0x49, 7);
  w[1] = 0x14 | (5 << 8);
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
  struct kfd_ioctl_get_clock_counters_args *c = arg;
  c->gpu_id = gpu_id;
  kioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, c, "GET_CLOCK_COUNTERS");
  return NULL;
}

int main(void) {
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
  uint32_t words[64];
  unsigned n = release_mem(words, signals.va + 8, 7, 0, 0);
  n += release_mem(words + n, mailbox, ev.event_id, 2, ev.event_id);
  submit(&compute, words, n);
  struct kfd_event_data data = {.event_id = ev.event_id};
  struct kfd_ioctl_wait_events_args w = {
      .events_ptr = (uint64_t)(uintptr_t)&data,
      .num_events = 1,
      .wait_for_all = 1,
      .timeout = 20000,
  };
  kioctl(AMDKFD_IOC_WAIT_EVENTS, &w, "WAIT_EVENTS");
  volatile uint32_t *signal = (volatile uint32_t *)((char *)signals.cpu + 8);
  printf("wait_result %u signal %u\n", w.wait_result, *signal);
  if (w.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE || *signal != 7) fail("compute signal");

  /* SDMA: GTT -> VRAM -> GTT, then a FENCE. */
  enum { BYTES = 3 * 4096 + 100 };
  struct buffer src = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  struct buffer vram = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
  struct buffer back = alloc(0x4000, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  uint8_t *s = src.cpu;
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
  const uint8_t *b = back.cpu;
  for (unsigned i = 0; i < 0x4000; i++) {
    uint8_t want = i < BYTES ? (uint8_t)(i * 7 + 3) : 0xee;
    if (b[i] != want) fail("byte %u after the copies is %u, not %u", i, b[i], want);
  }
  printf("sdma copied %d bytes\n", BYTES);

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
