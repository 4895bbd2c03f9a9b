/* bcryptprimitives.dll for Wine 8, which lacks it: Go 1.22 and later call
 * ProcessPrng from it at start-up. This forwards to BCryptGenRandom, which
 * Wine has. Built by TestCheckUnderWine with MinGW; tests only. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0;
}
