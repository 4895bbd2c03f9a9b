/* bcryptprimitives.dll for Wine 8, which lacks it: Go 1.22 and later call
 * ProcessPrng from it at start-up. This forwards to BCryptGenRandom, which
 * Wine has. Built by the tests with MinGW; tests only. (A copy of
 * cmd/trayapp/testdata/bcryptprimitives.c: this module cannot reach that
 * package's testdata reliably.) */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0;
}
