package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
)

// reopenResult is `npuchat bench --reopen N`: the time to the first token
// of a chat of N tokens reopened with a new message, computed from
// nothing, from the KV cache in memory, and from its KV file (a restart:
// a new cache, the file read back into memory and checked:
// engine.Model.ReadKVFile), and from its KV file read when the chat was
// opened (warmed); memory, disk and warmed are medians of 3, with the
// page faults of the disk path.
type reopenResult struct {
	Model       string  `json:"model"`
	Threads     int     `json:"threads"`
	SIMD        string  `json:"simd"`
	KVType      string  `json:"kv_type"`
	ChatTokens  int     `json:"chat_tokens"`
	NewTokens   int     `json:"new_tokens"`
	ColdSeconds float64 `json:"cold_first_token_s"`   // the whole prompt prefilled
	MemSeconds  float64 `json:"memory_first_token_s"` // resumed from the KV cache in memory
	DiskSeconds float64 `json:"disk_first_token_s"`   // a new cache: the KV file read, then resumed
	DiskRead    float64 `json:"disk_read_s"`          // of which reading and checking the file
	// WarmSeconds is the first token from the KV file read when the chat
	// was opened in the page (service/cpu WarmCache), before its message
	// was sent: the read is not counted.
	WarmSeconds float64 `json:"warmed_first_token_s"`
	FileBytes   int64   `json:"file_bytes"`
	// DiskReadFaults and DiskFaults are the minor page faults of the
	// read and of the whole reopen from disk (read, resume, prefill),
	// medians (-1 where the system does not count them): counts, not
	// times, so a busy machine shows them too. Copying the file into
	// fresh memory faults once per 4 KB.
	DiskReadFaults int64 `json:"disk_read_faults"`
	DiskFaults     int64 `json:"disk_faults"`
	MemFaults      int64 `json:"memory_faults"` // of the reopen from memory
	CachedTokens   int   `json:"cached_tokens"` // prompt tokens not computed on a reopen
}

// benchReopen measures reopening a chat of chatTokens tokens with a
// new message of newTokens tokens (its first token after the prompt).
func benchReopen(ctx context.Context, path string, opts engine.LoadOptions, chatTokens, newTokens int) (*reopenResult, error) {
	m, err := engine.Load(path, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	cfg := m.Config()
	res := &reopenResult{Model: path, Threads: m.Threads(), SIMD: m.SIMD(), KVType: m.KVType(), ChatTokens: chatTokens, NewTokens: newTokens}
	chat := make([]int, chatTokens+newTokens)
	for i := range chat {
		chat[i] = (i*7919 + 13) % cfg.VocabSize
	}
	prompt := chat[:chatTokens]
	budget := m.KVBytes(chatTokens+newTokens+512) * 2
	newCache := func() (*engine.KVCache, *engine.Session) {
		c := m.NewKVCache(engine.KVCacheOptions{Budget: budget})
		// a context past the kept chat's room for an answer, so that the
		// reopened chat is taken over, not copied, as in the app (whose
		// context is the model's or the setting's)
		return c, c.NewSession(chatTokens + newTokens + 512)
	}
	// first token of prompt from s
	first := func(s *engine.Session, prompt []int) (time.Duration, int, error) {
		start := time.Now()
		n, err := s.Resume("", prompt)
		if err != nil {
			return 0, 0, err
		}
		logits, err := s.PrefillContext(ctx, prompt[n:])
		if err != nil {
			return 0, 0, err
		}
		sample.Argmax(logits)
		return time.Since(start), n, nil
	}

	// the chat's first visit: everything computed
	c, s := newCache()
	d, _, err := first(s, prompt)
	if err != nil {
		return nil, err
	}
	res.ColdSeconds = d.Seconds()
	s.Keep()
	kept := c.Kept()[0]
	dir, err := os.MkdirTemp("", "npuchat-bench-kv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "chat.kv")
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := m.WriteKV(f, kept, "bench"); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(file); err == nil {
		res.FileBytes = fi.Size()
	}

	var mem, disk, read, readFaults, faults, warm, memFaults []float64
	for range 3 {
		// reopened in this run: from memory (taken over; the next round
		// inserts the same kept chat again, its tail rewound)
		c, s := newCache()
		if !c.Insert(kept) {
			return nil, fmt.Errorf("the KV cache has no room for the chat")
		}
		f0 := minorFaults()
		d, n, err := first(s, chat)
		if err != nil {
			return nil, err
		}
		mem = append(mem, d.Seconds())
		memFaults = append(memFaults, float64(faultsSince(f0)))
		res.CachedTokens = n
		s.Discard()

		// after a restart: a new cache, the file read back
		c, s = newCache()
		f0 = minorFaults()
		start := time.Now()
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		st, _, err := m.ReadKVFile(f, "bench", engine.ReadKVOptions{Capacity: chatTokens + newTokens + 64})
		f.Close()
		if err != nil {
			return nil, err
		}
		read = append(read, time.Since(start).Seconds())
		readFaults = append(readFaults, float64(faultsSince(f0)))
		c.Insert(st)
		d, n, err = first(s, chat)
		if err != nil {
			return nil, err
		}
		if n != chatTokens {
			return nil, fmt.Errorf("from the file %d tokens were reused, want %d", n, chatTokens)
		}
		disk = append(disk, time.Since(start).Seconds())
		faults = append(faults, float64(faultsSince(f0)))
		s.Discard()

		// warmed on open: the file read when the chat was opened, then
		// the message sent
		c, s = newCache()
		if f, err = os.Open(file); err != nil {
			return nil, err
		}
		st, _, err = m.ReadKVFile(f, "bench", engine.ReadKVOptions{Capacity: chatTokens + newTokens + 64})
		f.Close()
		if err != nil {
			return nil, err
		}
		c.Insert(st)
		if d, n, err = first(s, chat); err != nil {
			return nil, err
		}
		if n != chatTokens {
			return nil, fmt.Errorf("warmed from the file %d tokens were reused, want %d", n, chatTokens)
		}
		warm = append(warm, d.Seconds())
		s.Discard()
	}
	res.MemSeconds, res.DiskSeconds, res.DiskRead = median(mem), median(disk), median(read)
	res.DiskReadFaults, res.DiskFaults = int64(median(readFaults)), int64(median(faults))
	res.WarmSeconds, res.MemFaults = median(warm), int64(median(memFaults))
	return res, nil
}

// minorFaults is the process's minor page faults so far, from
// /proc/self/stat (-1 where there is none).
func minorFaults() int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	// the fields after the command's ")": state, ppid, pgrp, session,
	// tty_nr, tpgid, flags, minflt
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 8 {
		return -1
	}
	n, err := strconv.ParseInt(f[7], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// faultsSince is the minor page faults since minorFaults returned from
// (-1 where unknown).
func faultsSince(from int64) int64 {
	if now := minorFaults(); from >= 0 && now >= 0 {
		return now - from
	}
	return -1
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// printReopen writes a reopen measurement as a few lines of text.
func printReopen(w io.Writer, r *reopenResult) {
	fmt.Fprintf(w, "model    %s\nthreads  %d, SIMD %s, KV %s\nchat     %d tokens + %d new\n"+
		"first token: computed %.2f s · from memory %.3f s · from disk %.3f s (file %.1f MB read and checked in %.3f s)\n"+
		"             warmed on open (the file read when the chat was opened) %.3f s\n"+
		"faults   from disk: %d minor page faults reading the file, %d in all; from memory %d\n"+
		"cached   %d of %d prompt tokens\n",
		r.Model, r.Threads, r.SIMD, r.KVType, r.ChatTokens, r.NewTokens, r.ColdSeconds, r.MemSeconds, r.DiskSeconds,
		float64(r.FileBytes)/(1<<20), r.DiskRead, r.WarmSeconds, r.DiskReadFaults, r.DiskFaults, r.MemFaults, r.CachedTokens, r.ChatTokens+r.NewTokens)
}
