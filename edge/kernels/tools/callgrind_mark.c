/* callgrind_mark: oxk_insn_mark(label) splits a callgrind profile at a point the program chooses.
 *
 * The host-side twin of qemu_insn_count.c's markers, for counting native instructions:
 *     valgrind --tool=callgrind --instr-atstart=no ... python prog.py
 * where prog.py calls oxk_insn_mark(k) through ctypes. The first call switches instrumentation
 * on; every call dumps the instructions counted since the previous dump into a profile part
 * whose trigger reads "oxk-mark <label>" (callgrind zeroes its counters after a dump). Outside
 * valgrind the call does nothing and returns 0. Needs valgrind's callgrind.h (Debian: valgrind).
 */
#include <stdio.h>
#include <valgrind/callgrind.h>

__attribute__((visibility("default"))) int oxk_insn_mark(long label) {
    static int started;
    char reason[48];
    if (!RUNNING_ON_VALGRIND)
        return 0;
    if (!started) {
        CALLGRIND_START_INSTRUMENTATION;
        started = 1;
    }
    snprintf(reason, sizeof(reason), "oxk-mark %ld", label);
    CALLGRIND_DUMP_STATS_AT(reason);
    return 1;
}
