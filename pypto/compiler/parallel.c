/* PyPTO's parallel runtime: one thread pool shared by every kernel the compile cache loads.
 *
 * Each cached kernel library carries its own copy of the Halide runtime, hence its own thread
 * pool. Two problems follow on small machines, both measured on a 2-core VM:
 *   - A Halide worker sleeps as soon as a parallel loop ends. The next call wakes it, and the
 *     scheduler often places it on the caller's core, where the two then share one core for tens
 *     of milliseconds: a 2.3 ms matmul took 5.5 ms after a 20 ms pause.
 *   - Every op has its own sleeping workers, so a program of several ops wakes a pool per op.
 *
 * This pool replaces halide_do_par_for in every kernel (halide_set_custom_do_par_for). Its
 * workers spin for a bounded time after their last task (PYPTO_SPIN_US, default 1000 µs; 0 turns
 * spinning off) before they sleep, so the calls of a program or a model step find them running.
 * Sleeping workers are woken off the poster's core (pp_aim_sleepers); one that still wakes there
 * moves itself to another allowed core (pp_steer). Nested parallel loops are supported: a thread that waits for its loop helps run any open
 * loop meanwhile. Async tasks (halide_do_parallel_tasks) stay with each kernel's own runtime.
 *
 * The thread count is HL_NUM_THREADS when set, else the number of cores this process may use;
 * the calling thread counts as one.
 *
 * It also holds the kernels' heap memory (halide_set_custom_malloc/free): the buffers a pipeline
 * allocates for its intermediates (a compute_root Func, a join, a padded input). glibc returns
 * a freed block of more than a few hundred KiB to the system, so every call paid munmap (a TLB
 * shootdown across the pool's cores) and then a page fault per 4 KiB page of the next call's
 * buffer: the weight-gradient pipeline of an LSTM layer spent 9 of its 113 ms in malloc and free
 * and more in faults on fresh buffers. Freed blocks of at least PP_CACHE_MIN bytes are kept, up
 * to PYPTO_KERNEL_CACHE_MB MiB in all (default 256; 0 keeps none), newest last, and handed to a
 * later allocation of the same size or a little smaller; pypto_mem_trim() releases them.
 *
 * Written with GCC/Clang __atomic builtins, so any C or C++ compiler of those families builds it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*pp_task_t)(void *user_context, int index, uint8_t *closure);

typedef struct pp_job {
    pp_task_t fn;
    void *user_context;
    uint8_t *closure;
    int min, size;
    int next;  /* next index to claim (atomic) */
    int done;  /* indices finished (atomic) */
    int error; /* first non-zero result (atomic) */
    struct pp_job *prev, *succ;
} pp_job;

#define PP_MAX_THREADS 256

static pthread_mutex_t pp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pp_wake = PTHREAD_COND_INITIALIZER;
static pp_job *pp_jobs;         /* open jobs, newest first; guarded by pp_lock */
static unsigned pp_generation;  /* bumped when a job is posted (atomic) */
static int pp_sleepers;         /* workers waiting on pp_wake; guarded by pp_lock */
static int pp_started;          /* workers created (0 until first use, or after fork) */
static int pp_workers;          /* worker threads, not counting callers */
static pthread_t pp_threads[PP_MAX_THREADS];
static char pp_asleep[PP_MAX_THREADS];   /* worker t waits on pp_wake; guarded by pp_lock */
static char pp_aimed[PP_MAX_THREADS];    /* worker t's affinity was narrowed to wake it elsewhere */
static long pp_aims;                     /* sleeping workers so aimed */
static cpu_set_t pp_allowed;             /* the cores this process may use (at pool start) */
static long pp_spin_ns = 1000000;
static int pp_poster_cpu = -1;  /* core of the last thread that posted a job (atomic) */
static long pp_migrations;      /* statistics (atomic) */
static long pp_jobs_posted;
static long pp_wakeups;

static inline void pp_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long pp_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Runs index i of job j, then claims and runs further indices of j while any remain. The job
 * stays alive while this thread holds an unfinished index: its poster waits for done == size. */
static void pp_run_from(pp_job *j, int i) {
    const int size = j->size; /* read before the last done++: j may be gone after it */
    for (;;) {
        int r = j->fn(j->user_context, j->min + i, j->closure);
        if (r != 0) {
            int zero = 0;
            __atomic_compare_exchange_n(&j->error, &zero, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        }
        int k = __atomic_fetch_add(&j->next, 1, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&j->done, 1, __ATOMIC_ACQ_REL); /* after this, only k keeps j alive */
        if (k >= size) return;
        i = k;
    }
}

/* Claims an index of any open job; returns the job (and the index) or NULL. */
static pp_job *pp_claim(int *index) {
    pp_job *found = NULL;
    pthread_mutex_lock(&pp_lock);
    for (pp_job *j = pp_jobs; j; j = j->succ) {
        if (__atomic_load_n(&j->next, __ATOMIC_ACQUIRE) < j->size) {
            int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_ACQ_REL);
            if (i < j->size) {
                *index = i;
                found = j;
                break;
            }
        }
    }
    pthread_mutex_unlock(&pp_lock);
    return found;
}

/* Moves the calling worker off the core the poster runs on, when it woke up there. */
static void pp_steer(void) {
    int here = sched_getcpu();
    int poster = __atomic_load_n(&pp_poster_cpu, __ATOMIC_RELAXED);
    if (here < 0 || here != poster) return;
    cpu_set_t mine, others;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return;
    others = mine;
    CPU_CLR(here, &others);
    if (CPU_COUNT(&others) == 0) return;
    if (sched_setaffinity(0, sizeof others, &others) == 0) {
        __atomic_fetch_add(&pp_migrations, 1, __ATOMIC_RELAXED);
        sched_setaffinity(0, sizeof mine, &mine); /* moved; free to roam again */
    }
}

/* Narrows each sleeping worker's affinity to the cores other than the poster's, before it is
 * woken (called with pp_lock held). Left to itself the scheduler often wakes a worker on the
 * core of the thread that woke it, whose work it then cannot share; pp_steer moves it after, but
 * on a VM the move waits for the other, idle vCPU to be scheduled again. Two cores, matmul 256^3
 * after a 0.3 s pause: the worker took no task in the first five calls (it ran one thread's
 * speed, 0.33 ms against 0.2 in steady state; OpenBLAS 0.22 from its second call). The worker
 * restores its affinity once awake. */
static void pp_aim_sleepers(void) {
    int here = sched_getcpu();
    if (here < 0 || !CPU_ISSET(here, &pp_allowed)) return;
    cpu_set_t others = pp_allowed;
    CPU_CLR(here, &others);
    if (CPU_COUNT(&others) == 0) return;
    for (int t = 0; t < pp_workers; t++) {
        if (pp_asleep[t] && !pp_aimed[t] &&
            pthread_setaffinity_np(pp_threads[t], sizeof others, &others) == 0) {
            pp_aimed[t] = 1;
            __atomic_fetch_add(&pp_aims, 1, __ATOMIC_RELAXED);
        }
    }
}

static void *pp_worker(void *arg) {
    const int me = (int)(intptr_t)arg;
    for (;;) {
        int i;
        pp_job *j = pp_claim(&i);
        if (j) {
            pp_run_from(j, i);
            continue;
        }
        unsigned seen = __atomic_load_n(&pp_generation, __ATOMIC_ACQUIRE);
        if (pp_spin_ns > 0) {
            long until = pp_now_ns() + pp_spin_ns;
            int n = 0;
            while (__atomic_load_n(&pp_generation, __ATOMIC_ACQUIRE) == seen) {
                pp_relax();
                if ((++n & 255) == 0) {
                    if (pp_now_ns() > until) break;
                    sched_yield(); /* let another runnable thread have this core */
                }
            }
            if (__atomic_load_n(&pp_generation, __ATOMIC_ACQUIRE) != seen) continue;
        }
        pthread_mutex_lock(&pp_lock);
        int slept = 0;
        while (__atomic_load_n(&pp_generation, __ATOMIC_ACQUIRE) == seen) {
            pp_sleepers++;
            pp_asleep[me] = 1;
            pthread_cond_wait(&pp_wake, &pp_lock);
            pp_asleep[me] = 0;
            pp_sleepers--;
            slept = 1;
        }
        int aimed = pp_aimed[me];
        pp_aimed[me] = 0;
        pthread_mutex_unlock(&pp_lock);
        if (aimed) /* woken off the poster's core: free to roam again, staying where it is */
            pthread_setaffinity_np(pthread_self(), sizeof pp_allowed, &pp_allowed);
        if (slept) {
            __atomic_fetch_add(&pp_wakeups, 1, __ATOMIC_RELAXED);
            pp_steer();
        }
    }
    return NULL;
}

static void pp_mem_after_fork_child(void);

static void pp_after_fork_child(void) {
    /* Only the forking thread survives a fork: start a fresh pool on first use. */
    pthread_mutex_init(&pp_lock, NULL);
    pp_mem_after_fork_child();
    pthread_cond_init(&pp_wake, NULL);
    pp_jobs = NULL;
    pp_sleepers = 0;
    pp_started = 0;
    pp_workers = 0;
}

static void pp_start(void) {
    static int atfork_done = 0;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, pp_after_fork_child);
        atfork_done = 1;
    }
    const char *spin = getenv("PYPTO_SPIN_US");
    if (spin && *spin) pp_spin_ns = atol(spin) * 1000L;
    if (pp_spin_ns < 0) pp_spin_ns = 0;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    int ncpu = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
    pp_allowed = allowed;
    int threads = ncpu > 0 ? ncpu : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("HL_NUM_THREADS");
    if (env && *env && atoi(env) > 0) threads = atoi(env);
    if (threads > PP_MAX_THREADS) threads = PP_MAX_THREADS;
    if (threads < 1) threads = 1;
    int made = 0;
    for (int t = 0; t < threads - 1; t++) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pp_asleep[made] = pp_aimed[made] = 0;
        if (pthread_create(&th, &attr, pp_worker, (void *)(intptr_t)made) == 0)
            pp_threads[made++] = th;
        pthread_attr_destroy(&attr);
    }
    pp_workers = made;
    __atomic_store_n(&pp_started, 1, __ATOMIC_RELEASE);
}

int pypto_do_par_for(void *user_context, pp_task_t fn, int min, int size, uint8_t *closure) {
    if (size <= 0) return 0;
    if (!__atomic_load_n(&pp_started, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&pp_lock);
        if (!pp_started) pp_start();
        pthread_mutex_unlock(&pp_lock);
    }
    if (size == 1 || pp_workers == 0) {
        for (int i = 0; i < size; i++) {
            int r = fn(user_context, min + i, closure);
            if (r != 0) return r;
        }
        return 0;
    }
    pp_job job;
    memset(&job, 0, sizeof job);
    job.fn = fn;
    job.user_context = user_context;
    job.closure = closure;
    job.min = min;
    job.size = size;
    job.next = 1; /* this thread takes index 0 */
    __atomic_store_n(&pp_poster_cpu, sched_getcpu(), __ATOMIC_RELAXED);
    pthread_mutex_lock(&pp_lock);
    job.succ = pp_jobs;
    if (pp_jobs) pp_jobs->prev = &job;
    pp_jobs = &job;
    __atomic_fetch_add(&pp_generation, 1, __ATOMIC_ACQ_REL);
    if (pp_sleepers > 0) {
        if (size - 1 >= pp_sleepers) {
            pp_aim_sleepers(); /* all of them wake, so none stays narrowed */
            pthread_cond_broadcast(&pp_wake);
        }
        else for (int k = 0; k < size - 1; k++) pthread_cond_signal(&pp_wake);
    }
    pthread_mutex_unlock(&pp_lock);
    __atomic_fetch_add(&pp_jobs_posted, 1, __ATOMIC_RELAXED);

    pp_run_from(&job, 0);
    /* Our indices are all claimed; help other open jobs until the last of ours finishes. */
    int n = 0;
    while (__atomic_load_n(&job.done, __ATOMIC_ACQUIRE) < size) {
        int i;
        pp_job *other = NULL;
        if ((n & 63) == 0) other = pp_claim(&i);
        if (other) {
            pp_run_from(other, i);
            continue;
        }
        pp_relax();
        if ((++n & 1023) == 0) sched_yield();
    }
    pthread_mutex_lock(&pp_lock);
    if (job.prev) job.prev->succ = job.succ;
    else pp_jobs = job.succ;
    if (job.succ) job.succ->prev = job.prev;
    pthread_mutex_unlock(&pp_lock);
    return __atomic_load_n(&job.error, __ATOMIC_ACQUIRE);
}

/* ---- Kernel heap memory -------------------------------------------------------------------- */

#define PP_ALIGN 128                  /* every block's data starts 128 bytes into it, aligned */
#define PP_CACHE_MIN (64L * 1024)     /* smaller blocks go straight back to malloc */
#define PP_CACHE_SLOTS 64
#define PP_MAGIC 0x7079707400000000UL /* "pypt" in the header's high half: a sanity check */

typedef struct {
    size_t size;  /* usable bytes */
    size_t magic;
} pp_header;

static pthread_mutex_t pp_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static char *pp_kept[PP_CACHE_SLOTS]; /* freed blocks (their bases), oldest first */
static int pp_nkept;
static long pp_kept_bytes;
static long pp_keep_max = -1;         /* bytes; -1 until read from PYPTO_KERNEL_CACHE_MB */
static long pp_mem_hits, pp_mem_misses, pp_mem_evictions, pp_mem_foreign;

static void pp_mem_after_fork_child(void) {
    /* The child keeps the blocks (its copy of the memory); only the lock may be mid-use. */
    pthread_mutex_init(&pp_mem_lock, NULL);
}

static long pp_keep_limit(void) {
    if (pp_keep_max < 0) {
        const char *env = getenv("PYPTO_KERNEL_CACHE_MB");
        long mb = (env && *env) ? atol(env) : 256;
        pp_keep_max = mb > 0 ? mb * 1024L * 1024L : 0;
    }
    return pp_keep_max;
}

static size_t pp_block_size(char *base) { return ((pp_header *)base)->size; }

/* Sizes of cachable blocks round up to 64 KiB, so that a pipeline whose buffer sizes vary a
 * little with the shape still reuses them. */
static size_t pp_round(size_t n) {
    if (n >= (size_t)PP_CACHE_MIN) return (n + 65535) & ~(size_t)65535;
    return (n + PP_ALIGN - 1) & ~(size_t)(PP_ALIGN - 1);
}

void *pypto_malloc(void *user_context, size_t size) {
    (void)user_context;
    size_t need = pp_round(size ? size : 1);
    if (need >= (size_t)PP_CACHE_MIN && pp_keep_limit() > 0) {
        pthread_mutex_lock(&pp_mem_lock);
        int best = -1;
        for (int i = 0; i < pp_nkept; i++) {
            size_t have = pp_block_size(pp_kept[i]);
            /* the same size or up to a quarter larger: a big block is not spent on a small need */
            if (have >= need && have <= need + need / 4 &&
                (best < 0 || have < pp_block_size(pp_kept[best])))
                best = i;
        }
        if (best >= 0) {
            char *base = pp_kept[best];
            memmove(&pp_kept[best], &pp_kept[best + 1], (size_t)(pp_nkept - best - 1) * sizeof(char *));
            pp_nkept--;
            pp_kept_bytes -= (long)pp_block_size(base);
            pp_mem_hits++;
            pthread_mutex_unlock(&pp_mem_lock);
            return base + PP_ALIGN;
        }
        pp_mem_misses++;
        pthread_mutex_unlock(&pp_mem_lock);
    }
    void *base = NULL;
    if (posix_memalign(&base, PP_ALIGN, need + PP_ALIGN) != 0) return NULL;
    ((pp_header *)base)->size = need;
    ((pp_header *)base)->magic = PP_MAGIC;
    return (char *)base + PP_ALIGN;
}

void pypto_free(void *user_context, void *ptr) {
    (void)user_context;
    if (!ptr) return;
    char *base = (char *)ptr - PP_ALIGN;
    if (((pp_header *)base)->magic != PP_MAGIC) {
        /* Not a block of ours (cannot happen while both hooks are installed together before a
         * kernel's first call): leaked and counted rather than freed the wrong way. */
        __atomic_fetch_add(&pp_mem_foreign, 1, __ATOMIC_RELAXED);
        return;
    }
    long size = (long)pp_block_size(base);
    long limit = size >= PP_CACHE_MIN ? pp_keep_limit() : 0;
    if (size > limit) {
        free(base);
        return;
    }
    char *evict[PP_CACHE_SLOTS];
    int nevict = 0;
    pthread_mutex_lock(&pp_mem_lock);
    while (pp_nkept > 0 && (pp_nkept == PP_CACHE_SLOTS || pp_kept_bytes + size > limit)) {
        evict[nevict++] = pp_kept[0]; /* the oldest */
        pp_kept_bytes -= (long)pp_block_size(pp_kept[0]);
        memmove(&pp_kept[0], &pp_kept[1], (size_t)(pp_nkept - 1) * sizeof(char *));
        pp_nkept--;
    }
    pp_kept[pp_nkept++] = base;
    pp_kept_bytes += size;
    pp_mem_evictions += nevict;
    pthread_mutex_unlock(&pp_mem_lock);
    for (int i = 0; i < nevict; i++) free(evict[i]);
}

/* Releases every kept block; returns the bytes released. */
long pypto_mem_trim(void) {
    char *out[PP_CACHE_SLOTS];
    pthread_mutex_lock(&pp_mem_lock);
    int n = pp_nkept;
    long bytes = pp_kept_bytes;
    memcpy(out, pp_kept, (size_t)n * sizeof(char *));
    pp_nkept = 0;
    pp_kept_bytes = 0;
    pthread_mutex_unlock(&pp_mem_lock);
    for (int i = 0; i < n; i++) free(out[i]);
    return bytes;
}

/* Sets the limit in bytes (0 keeps none; blocks over a lower limit are released); returns the
 * old one. */
long pypto_mem_set_limit(long bytes) {
    long old = pp_keep_limit();
    pthread_mutex_lock(&pp_mem_lock);
    pp_keep_max = bytes > 0 ? bytes : 0;
    pthread_mutex_unlock(&pp_mem_lock);
    if (bytes < old) pypto_mem_trim();
    return old;
}

/* Heap statistics: allocations served from kept blocks, cachable ones that were not, blocks
 * released to make room, blocks and bytes kept now, the limit in bytes, and frees of pointers
 * that were not ours (leaked; always 0 unless something is wrong). */
void pypto_mem_stats(long *out) {
    pthread_mutex_lock(&pp_mem_lock);
    out[0] = pp_mem_hits;
    out[1] = pp_mem_misses;
    out[2] = pp_mem_evictions;
    out[3] = pp_nkept;
    out[4] = pp_kept_bytes;
    out[5] = pp_keep_limit();
    out[6] = __atomic_load_n(&pp_mem_foreign, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&pp_mem_lock);
}

/* Statistics for tests and diagnostics: threads, jobs posted, wake-ups, migrations, spin µs,
 * sleeping workers aimed off the poster's core. */
void pypto_pool_stats(long *out) {
    out[0] = __atomic_load_n(&pp_started, __ATOMIC_ACQUIRE) ? pp_workers + 1 : 0;
    out[1] = __atomic_load_n(&pp_jobs_posted, __ATOMIC_RELAXED);
    out[2] = __atomic_load_n(&pp_wakeups, __ATOMIC_RELAXED);
    out[3] = __atomic_load_n(&pp_migrations, __ATOMIC_RELAXED);
    out[4] = pp_spin_ns / 1000;
    out[5] = __atomic_load_n(&pp_aims, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif
