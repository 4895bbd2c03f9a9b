/* A stand-in for libxrt_coreutil.so.2 with the C entry points the probe
 * uses, built by the tests with cc. FAKE_MODE picks the behaviour of
 * xrtDeviceOpen: 0 opens, 1 returns NULL (no device), 2 crashes, 3 hangs.
 * NO_VERSION leaves out the version API, like an XRT older than 2023. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef NO_VERSION
unsigned int xrtVersionMajor(void) { return 2; }
unsigned int xrtVersionMinor(void) { return 19; }
unsigned int xrtVersionPatch(void) { return 7; }
#endif

static int handle;
static int open_count;

void *xrtDeviceOpen(unsigned int index) {
	if (index != 0) return 0;
#if FAKE_MODE == 1
	return 0;
#elif FAKE_MODE == 2
	raise(SIGSEGV);
	return 0;
#elif FAKE_MODE == 3
	for (;;) sleep(1);
#else
	open_count++;
	return &handle;
#endif
}

int xrtDeviceClose(void *h) {
	if (h != &handle || open_count != 1) return -1;
	open_count--;
	return 0;
}
