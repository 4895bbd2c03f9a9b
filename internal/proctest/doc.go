// Package proctest lets a test wait for a process to end on the event
// itself, not by polling: on Linux, a pidfd taken while the process
// lives becomes readable when it ends (a child or not, reaped or a
// zombie). Other systems have no pidfd; the package offers nothing
// there.
package proctest
