/* Stand-ins for the plan and the arena of tests/firmware/size_probe.c: in
 * their own file so the compiler cannot see through them; their bytes are
 * not part of the sizes reported. */
#include <stddef.h>
#include <stdint.h>

const uint8_t probe_plan[64];
const size_t probe_plan_size = sizeof probe_plan;
uint8_t probe_arena[256];
const size_t probe_arena_size = sizeof probe_arena;
