package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/mmapfile"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/engine/tokenizer"
)

// runTokenize implements `npuchat tokenize`: the token ids of the text on
// standard input, or (with --decode) the text of ids.
//
// By default special tokens in the input are plain text: typing
// "<|im_end|>" gives the ids of those characters, not the end-of-turn
// token, because that is how user text must be treated (a user cannot
// end a turn by typing it). --special recognises them, which is what a
// prompt rendered by a chat template needs.
func runTokenize(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	model := fs.String("model", "", "tokenizer.json, a model folder holding one, or a .gguf file")
	asJSON := fs.Bool("json", false, `print {"ids":[...]} instead of space-separated ids`)
	jsonl := fs.Bool("jsonl", false, `read one JSON string per line, print one {"ids":[...]} per line`)
	decode := fs.Bool("decode", false, "read ids (space or comma separated, or a JSON array) and print their text")
	special := fs.Bool("special", false, "recognise special tokens such as <|im_end|> in the input (default: they are plain text)")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat tokenize --model PATH [--json | --jsonl | --decode] [--special] < input")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "npuchat tokenize: unexpected argument %q; the text is read from standard input\n", fs.Arg(0))
		return 2
	}
	if *model == "" {
		fmt.Fprintln(env.Stderr, "npuchat tokenize: --model PATH is required (a tokenizer.json, or a model folder holding one)")
		return 2
	}
	if n := countTrue(*asJSON, *jsonl, *decode); n > 1 {
		fmt.Fprintln(env.Stderr, "npuchat tokenize: use only one of --json, --jsonl and --decode")
		return 2
	}
	tok, err := loadTokenizer(*model)
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat tokenize: %v\n", err)
		return 1
	}
	encode := tok.EncodeOrdinary
	if *special {
		encode = tok.Encode
	}
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	switch {
	case *decode:
		err = decodeIDs(env.Stdin, out, tok)
	case *jsonl:
		err = encodeLines(ctx, env.Stdin, out, encode)
	default:
		var text []byte
		if text, err = io.ReadAll(env.Stdin); err == nil {
			err = writeIDs(out, encode(string(text)), *asJSON)
		}
	}
	if err != nil {
		out.Flush()
		fmt.Fprintf(env.Stderr, "npuchat tokenize: %v\n", err)
		return 1
	}
	return 0
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// loadTokenizer opens a tokenizer.json, a folder with one, or a GGUF file.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if isGGUF(path) {
		md, err := readGGUFMetadata(path)
		if err != nil {
			return nil, err
		}
		return tokenizer.FromGGUF(md)
	}
	return tokenizer.Load(path)
}

// isGGUF reports whether path is a file that starts with the GGUF magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// readGGUFMetadata returns a GGUF file's metadata as key -> value, read
// from a memory map of the file (the weights are not touched).
func readGGUFMetadata(path string) (map[string]any, error) {
	f, err := mmapfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := gguf.Parse(f.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h.Metadata, nil
}

func writeIDs(w io.Writer, ids []int, asJSON bool) error {
	if asJSON {
		return writeJSONIDs(w, ids)
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	_, err := fmt.Fprintln(w, strings.Join(parts, " "))
	return err
}

func writeJSONIDs(w io.Writer, ids []int) error {
	if ids == nil {
		ids = []int{}
	}
	b, err := json.Marshal(struct {
		IDs []int `json:"ids"`
	}{ids})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// encodeLines reads one JSON string per line and writes one {"ids":[...]}
// per line.
func encodeLines(ctx context.Context, r io.Reader, w io.Writer, encode func(string) []int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var text string
		if err := json.Unmarshal(sc.Bytes(), &text); err != nil {
			return fmt.Errorf("line %d: not a JSON string (--jsonl wants one per line, like \"hello\\n\"): %v", line, err)
		}
		if err := writeJSONIDs(w, encode(text)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	return nil
}

// decodeIDs reads ids as "1 2 3", "1,2,3" or "[1, 2, 3]" and writes their
// text exactly, with no newline added.
func decodeIDs(r io.Reader, w io.Writer, tok *tokenizer.Tokenizer) error {
	in, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	var ids []int
	if t := bytes.TrimSpace(in); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &ids); err != nil {
			return fmt.Errorf("input is not a JSON array of integers: %v", err)
		}
	} else {
		for _, f := range strings.FieldsFunc(string(in), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
			id, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("%q is not a token id (give ids separated by spaces or commas, or a JSON array)", f)
			}
			ids = append(ids, id)
		}
	}
	text, err := tok.Decode(ids)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, text)
	return err
}
