package oflm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/engine/q4nx"
)

// RowOrder is the order of q_proj/k_proj rows in a source container.
type RowOrder string

const (
	// RowsLlamaCpp: llama.cpp's permuted order, what FLM_Q4NX_Converter's
	// qwen3 family keeps from a llama-architecture GGUF. The MiniCPM5-2B
	// port (julianmb/MiniCPM5-2B-NPU2) is stored this way. The default.
	RowsLlamaCpp RowOrder = "llama.cpp"
	// RowsHF: Hugging Face order, as the llama family writes it (a pack
	// that is already llama-family, or a qwen3 pack from a qwen3 GGUF).
	RowsHF RowOrder = "hf"
)

// Options tune Convert.
type Options struct {
	// KVHeads is the KV head count to write: the kernel manifest's
	// hf_config_check num_key_value_heads (8 for MiniCPM5-2B's open
	// kernels). Heads are repeated as repeat_interleave does (each head
	// KVHeads/source times in a row), which leaves attention exactly as
	// it was. 0 keeps the source's count (the port already has 8).
	KVHeads int
	// SourceRows is the source's Q/K row order ("" is RowsLlamaCpp).
	SourceRows RowOrder
	// KernelManifest, when set, is the open kernel set's manifest.json
	// the container is for: KVHeads (when 0) is taken from its
	// hf_config_check, and the converted config.json is held against
	// that check before anything is written (a mismatch is an error).
	KernelManifest string
	// Progress, when not nil, is called as model.q4nx is written with the
	// bytes written so far and the file's size.
	Progress func(done, total int64)

	mut mutation // tests only: deliberately wrong conversions
}

// mutation breaks the conversion on purpose, for the tests that show the
// equivalence check catches a wrong conversion.
type mutation struct {
	keepQKNorm bool // copy the unit q/k norms instead of dropping them
	tileKV     bool // repeat KV heads as a whole (0,1,0,1…) instead of each in a row
	configKV   int  // write this num_key_value_heads into config.json, whatever the tensors hold
}

// Result says what Convert did.
type Result struct {
	// UpToDate is true when dst already held a verified conversion of the
	// same source with the same options, and nothing was written.
	UpToDate bool
	// Files are the files written (or found), with sizes and SHA-256.
	Files []FileSum
}

// Output files. chat_template.jinja is copied when the source has one.
const (
	weightsFile  = "model.q4nx"
	ManifestFile = "npuchat-oflm.json" // written last; its presence and hashes mean "done"
	tmpPrefix    = ".npuchat-oflm-"
)

// copied are the source files taken over unchanged.
var copied = []string{"tokenizer.json", "chat_template.jinja"}

// Prepare writes into dst the llama-family container oflm's open kernels
// read, from the installed MiniCPM5-2B-NPU2 folder src, keeping the
// source's KV head count (the port's 8, what the kernel manifest wants).
// See Convert.
func Prepare(ctx context.Context, src, dst string, progress func(done, total int64)) error {
	_, err := Convert(ctx, src, dst, Options{Progress: progress})
	return err
}

// Convert writes into dst a llama-family Q4NX container from the FLM
// pack in src: config.json (model_type llama), tokenizer_config.json (as
// oflm requires it), tokenizer.json and chat_template.jinja copied, and
// model.q4nx with the injected unit q/k norms dropped, Q/K rows in the
// llama converter's order and opts.KVHeads KV heads; every Q4_1 row kept
// bit for bit. The source folder is only read. Every file is first
// written whole to a temporary file in dst; only when all are complete is
// the manifest (ManifestFile) removed, the files renamed into place and
// the manifest written last. So a run that fails leaves dst as it was,
// and a folder with a manifest that verifies is a finished conversion. When dst
// already holds one made from the same source files with the same
// options, Convert verifies it and returns without writing.
func Convert(ctx context.Context, src, dst string, opts Options) (Result, error) {
	r, err := convert(ctx, src, dst, opts)
	if err != nil {
		return r, fmt.Errorf("prepare oflm weights in %s from %s: %w", dst, src, err)
	}
	return r, nil
}

func convert(ctx context.Context, src, dst string, opts Options) (Result, error) {
	switch opts.SourceRows {
	case "":
		opts.SourceRows = RowsLlamaCpp
	case RowsLlamaCpp, RowsHF:
	default:
		return Result{}, fmt.Errorf("unknown source row order %q (want %q or %q)", opts.SourceRows, RowsLlamaCpp, RowsHF)
	}
	if err := distinct(src, dst); err != nil {
		return Result{}, err
	}
	s, err := readShape(src)
	if err != nil {
		return Result{}, err
	}
	var kernels []byte
	if opts.KernelManifest != "" {
		if kernels, err = os.ReadFile(opts.KernelManifest); err != nil {
			return Result{}, fmt.Errorf("kernel manifest: %w", err)
		}
	}
	kv := opts.KVHeads
	if kv == 0 && kernels != nil {
		if kv, err = manifestKVHeads(kernels); err != nil {
			return Result{}, fmt.Errorf("kernel manifest %s: %w", opts.KernelManifest, err)
		}
	}
	if kv == 0 {
		kv = s.KVHeads
	}
	f, err := os.Open(filepath.Join(src, weightsFile))
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, err
	}
	h, err := readHeader(f, st.Size())
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", weightsFile, err)
	}
	p, err := makePlan(f, h, s, kv, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", weightsFile, err)
	}
	cfgKV := kv
	if opts.mut.configKV > 0 {
		cfgKV = opts.mut.configKV
	}
	cfg, err := s.llamaConfig(cfgKV)
	if err != nil {
		return Result{}, fmt.Errorf("config.json: %w", err)
	}
	if kernels != nil {
		ms, err := CheckConfig(cfg, kernels)
		if err != nil {
			return Result{}, fmt.Errorf("kernel manifest %s: %w", opts.KernelManifest, err)
		}
		if len(ms) > 0 {
			return Result{}, fmt.Errorf("this model does not fit the kernel set of %s: %s", opts.KernelManifest, Describe(ms))
		}
	}
	tok, err := tokenizerConfig(src, s.EOS)
	if err != nil {
		return Result{}, err
	}
	if !hasChatTemplate(src, tok) {
		return Result{}, errors.New("no chat template (chat_template.jinja or tokenizer_config.json's chat_template): oflm needs one")
	}
	id, err := identify(src, opts, kv)
	if err != nil {
		return Result{}, err
	}
	if m, err := readManifest(dst); err == nil && m.Source.equal(id) {
		if files, err := verify(dst, m); err == nil {
			return Result{UpToDate: true, Files: files}, nil
		}
	}

	if err := os.MkdirAll(dst, 0o755); err != nil {
		return Result{}, err
	}
	removeTemps(dst)
	// Every output is written whole into a temporary file of dst first;
	// only when all of them are complete does the folder change, so that a
	// run that fails or is cancelled (a damaged source, a full disk, the
	// user's Cancel) leaves a finished conversion as it was: the
	// registered model keeps working.
	small := []struct {
		name string
		data []byte
	}{{"config.json", cfg}, {"tokenizer_config.json", tok}}
	var obsolete []string // files an earlier conversion wrote that this one does not
	for _, name := range copied {
		b, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, os.ErrNotExist) && name == "chat_template.jinja" {
			// oflm would prefer a template left by an earlier
			// conversion to the one in tokenizer_config.json.
			obsolete = append(obsolete, name)
			continue
		}
		if err != nil {
			return Result{}, err
		}
		small = append(small, struct {
			name string
			data []byte
		}{name, b})
	}
	var staged []stagedFile
	defer func() {
		for _, s := range staged {
			os.Remove(s.tmp) // gone already when it was renamed into place
		}
	}()
	for _, x := range small {
		s, err := stageFile(dst, x.name, func(w io.Writer) error { _, err := w.Write(x.data); return err })
		if err != nil {
			return Result{}, err
		}
		staged = append(staged, s)
	}
	weights, err := stageFile(dst, weightsFile, func(w io.Writer) error { return p.write(ctx, w, f, h, opts.Progress) })
	if err != nil {
		return Result{}, err
	}
	staged = append(staged, weights)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	// From here on dst is not a finished conversion until the manifest
	// is written again.
	if err := os.Remove(filepath.Join(dst, ManifestFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Result{}, err
	}
	for _, name := range obsolete {
		if err := os.Remove(filepath.Join(dst, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Result{}, err
		}
	}
	var files []FileSum
	for _, s := range staged {
		if err := os.Rename(s.tmp, filepath.Join(dst, s.sum.Name)); err != nil {
			return Result{}, fmt.Errorf("write %s: %w", s.sum.Name, err)
		}
		files = append(files, s.sum)
	}
	if err := writeManifest(dst, manifest{Version: manifestVersion, Source: id, Files: files}); err != nil {
		return Result{}, err
	}
	return Result{Files: files}, nil
}

// distinct refuses a destination that is the source folder: the source's
// config.json and model.q4nx must never be overwritten.
func distinct(src, dst string) error {
	a, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	b, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if a == b {
		return errors.New("the destination is the source folder: the converted files must go to a folder of their own")
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil && os.SameFile(sa, sb) {
		return errors.New("the destination is the source folder: the converted files must go to a folder of their own")
	}
	return nil
}

// write streams the output container: the header, then every tensor
// copied, gathered or left out, checking on the way that no Q4NX tensor
// came from Q4_0 (all mins zero).
func (p *plan) write(ctx context.Context, w io.Writer, f *os.File, h *stHeader, progress func(done, total int64)) error {
	var outs []stTensor
	for _, s := range p.steps {
		if s.act != actDrop {
			outs = append(outs, s.out)
		}
	}
	head, err := encodeHeader(outs, h.Metadata)
	if err != nil {
		return err
	}
	total := int64(len(head))
	for _, t := range outs {
		total += t.Size()
	}
	pw := &progressWriter{w: w, total: total, progress: progress}
	if _, err := pw.Write(head); err != nil {
		return err
	}
	buf := make([]byte, 800*q4nx.ChunkBytes) // 4 MB, whole chunks
	for _, s := range p.steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch s.act {
		case actDrop:
			continue
		case actGather:
			b, err := readTensor(f, h, s.src)
			if err != nil {
				return err
			}
			if err := checkSigned(s.src.Name, b); err != nil {
				return err
			}
			if _, err := pw.Write(gatherRows(b, s.cols, s.from)); err != nil {
				return err
			}
		case actCopy:
			signed := s.packed
			r := io.NewSectionReader(f, h.DataStart+s.src.Start, s.src.Size())
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				n, err := io.ReadFull(r, buf)
				if n > 0 {
					for c := 0; signed && c+q4nx.ChunkBytes <= n; c += q4nx.ChunkBytes {
						signed = allMinsZero(buf[c : c+q4nx.ChunkBytes])
					}
					if _, werr := pw.Write(buf[:n]); werr != nil {
						return werr
					}
				}
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("read tensor %s: %w", s.src.Name, err)
				}
			}
			if signed {
				return signedError(s.src.Name)
			}
		}
	}
	if pw.done != total {
		return fmt.Errorf("wrote %d bytes of %d", pw.done, total)
	}
	return nil
}

// checkSigned refuses a packed tensor whose mins are all zero.
func checkSigned(name string, b []byte) error {
	for c := 0; c+q4nx.ChunkBytes <= len(b); c += q4nx.ChunkBytes {
		if !allMinsZero(b[c : c+q4nx.ChunkBytes]) {
			return nil
		}
	}
	return signedError(name)
}

func signedError(name string) error {
	return fmt.Errorf("tensor %s was converted from Q4_0 (every min is zero, the nibbles are signed): oflm's kernels read unsigned Q4_1 nibbles and would compute garbage; use a pack converted from Q4_1 or BF16", name)
}

// progressWriter counts bytes and reports them.
type progressWriter struct {
	w           io.Writer
	done, total int64
	progress    func(done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.progress != nil && n > 0 {
		p.progress(p.done, p.total)
	}
	return n, err
}

// writeFile writes dst/name through a temporary file in dst (synced, then
// renamed over name), so that name is either the old file or the whole
// new one, and returns its size and SHA-256.
func writeFile(dst, name string, fill func(io.Writer) error) (FileSum, error) {
	s, err := stageFile(dst, name, fill)
	if err != nil {
		return FileSum{}, err
	}
	if err := os.Rename(s.tmp, filepath.Join(dst, name)); err != nil {
		os.Remove(s.tmp)
		return FileSum{}, fmt.Errorf("write %s: %w", name, err)
	}
	return s.sum, nil
}

// stagedFile is an output written whole into a temporary file of its
// folder, not yet renamed over its name.
type stagedFile struct {
	tmp string
	sum FileSum
}

// stageFile writes what fill makes into a new temporary file in dst
// (synced and closed) and returns it with the size and SHA-256 it will
// have as dst/name. On error nothing is left behind.
func stageFile(dst, name string, fill func(io.Writer) error) (s stagedFile, err error) {
	tmp, err := os.CreateTemp(dst, tmpPrefix+name+".*")
	if err != nil {
		return s, fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", name, err)
		}
	}()
	hs := sha256.New()
	cw := &countWriter{h: hs}
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, cw), 1<<20)
	if err = fill(bw); err != nil {
		return s, err
	}
	if err = bw.Flush(); err != nil {
		return s, err
	}
	if err = tmp.Sync(); err != nil {
		return s, err
	}
	if err = tmp.Close(); err != nil {
		return s, err
	}
	return stagedFile{tmp: tmp.Name(), sum: FileSum{Name: name, Size: cw.n, SHA256: hex.EncodeToString(hs.Sum(nil))}}, nil
}

type countWriter struct {
	h hash.Hash
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return c.h.Write(b)
}

// removeTemps deletes temporary files a broken run left in dst.
func removeTemps(dst string) {
	entries, _ := os.ReadDir(dst)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			os.Remove(filepath.Join(dst, e.Name()))
		}
	}
}
