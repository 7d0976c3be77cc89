/* qemu_insn_count: a qemu-user TCG plugin that counts executed guest instructions.
 *
 * Load it with   qemu-aarch64 -plugin PATH/libqemu_insn_count.so,out=FILE ...
 * (or QEMU_PLUGIN="PATH/libqemu_insn_count.so,out=FILE" in the environment). At exit it writes
 *     total N
 *     mark LABEL N        (one line per marker, in order)
 * to FILE (stderr when no out= is given). N is the number of guest instructions executed so far.
 *
 * Markers: the guest cannot call the plugin, but the plugin sees every system call. A guest
 * syscall whose first argument is OXK_INSN_MARK_FD (an fd no process has open, so the kernel
 * answers EBADF and nothing happens) records the running count with the second argument as its
 * label: from Python, `os.lseek(0x4F584B49, label, 0)` (catch the OSError). The difference of two
 * marks is the work done between them, without interpreter start-up or model loading.
 *
 * Plugin API: this is written against QEMU's plugin API version 1, the one qemu-user 7.2
 * (Debian 12) implements. Debian ships no qemu-plugin.h, so the few declarations used are
 * copied here from that version's header. Later QEMUs (9.x) moved inline counters to per-vCPU
 * scoreboards and dropped the call used below: porting means using their qemu-plugin.h.
 * The counter is one shared uint64 updated inline at the start of every translated block: exact
 * for single-threaded guests (run the workload with one thread), approximate otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
typedef void (*syscall_cb)(qemu_plugin_id_t, unsigned int vcpu, int64_t num, uint64_t a1,
                           uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                           uint64_t a7, uint64_t a8);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, enum qemu_plugin_op,
                                                     void *, uint64_t);
extern void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t, syscall_cb);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);

#define EXPORT __attribute__((visibility("default")))
#define OXK_INSN_MARK_FD 0x4F584B49u   /* "OXKI" */
#define MAX_MARKS 65536

EXPORT int qemu_plugin_version = 1;

static uint64_t count;
static uint64_t mark_count[MAX_MARKS];
static int64_t mark_label[MAX_MARKS];
static unsigned n_marks, dropped_marks;
static char out_path[4096];

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count,
                                             qemu_plugin_tb_n_insns(tb));
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8) {
    if ((uint32_t)a1 != OXK_INSN_MARK_FD)
        return;
    if (n_marks == MAX_MARKS) {
        dropped_marks++;
        return;
    }
    mark_count[n_marks] = count;
    mark_label[n_marks] = (int64_t)a2;
    n_marks++;
}

static void on_atexit(qemu_plugin_id_t id, void *p) {
    FILE *f = out_path[0] ? fopen(out_path, "w") : NULL;
    unsigned i;
    if (out_path[0] && !f) {
        fprintf(stderr, "qemu_insn_count: cannot write %s\n", out_path);
    }
    if (!f)
        f = stderr;
    fprintf(f, "total %llu\n", (unsigned long long)count);
    for (i = 0; i < n_marks; i++)
        fprintf(f, "mark %lld %llu\n", (long long)mark_label[i], (unsigned long long)mark_count[i]);
    if (dropped_marks)
        fprintf(f, "dropped %u\n", dropped_marks);
    if (f != stderr)
        fclose(f);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                               char **argv) {
    int i;
    for (i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0 && strlen(argv[i] + 4) < sizeof(out_path)) {
            strcpy(out_path, argv[i] + 4);
        } else {
            fprintf(stderr, "qemu_insn_count: unknown argument '%s' (expected out=PATH)\n", argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
    return 0;
}
