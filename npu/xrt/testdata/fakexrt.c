/* A stand-in for XRT's core utility library (libxrt_coreutil.so.2 or
 * xrt_coreutil.dll) with the C entry points the probe uses, built by the
 * tests with cc or x86_64-w64-mingw32-gcc. FAKE_MODE picks the behaviour
 * of xrtDeviceOpen: 0 opens, 1 returns NULL (no device), 2 crashes,
 * 3 hangs. NO_VERSION leaves out the version API, like an XRT older
 * than 2023. */
#include <signal.h>
#include <stdlib.h>
#ifdef _WIN32
#include <windows.h>
#define EXPORT __declspec(dllexport)
#define pause_a_second() Sleep(1000)
#else
#include <unistd.h>
#define EXPORT
#define pause_a_second() sleep(1)
#endif

#ifndef NO_VERSION
EXPORT unsigned int xrtVersionMajor(void) { return 2; }
EXPORT unsigned int xrtVersionMinor(void) { return 19; }
EXPORT unsigned int xrtVersionPatch(void) { return 7; }
#endif

static int handle;
static int open_count;

EXPORT void *xrtDeviceOpen(unsigned int index) {
	if (index != 0) return 0;
#if FAKE_MODE == 1
	return 0;
#elif FAKE_MODE == 2
	raise(SIGSEGV);
	return 0;
#elif FAKE_MODE == 3
	for (;;) pause_a_second();
#else
	open_count++;
	return &handle;
#endif
}

EXPORT int xrtDeviceClose(void *h) {
	if (h != &handle || open_count != 1) return -1;
	open_count--;
	return 0;
}
