package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
)

// tokenizerUsage is `smg tokenizer`'s help: the subcommand that shows what the gateway's
// tokenizer and chat template make of a prompt, for debugging a template or a routing key.
const tokenizerUsage = `Usage: smg tokenizer encode|decode|render --model-path DIR [flags]

  encode   one JSON string per stdin line -> one JSON array of token ids per line
  decode   one JSON array of token ids per line -> one JSON string per line
  render   one OpenAI chat request (JSON) per line -> the rendered prompt as a JSON string

DIR is a model directory holding tokenizer.json and tokenizer_config.json (the files a
Hugging Face model repository ships). A bad line stops the command with exit code 1 and names
the line; a bad directory or command line exits 2.
`

// runTokenizer is `smg tokenizer ...`; it returns the exit code.
func runTokenizer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenizerUsage)
		return 2
	}
	verb := args[0]
	switch verb {
	case "--help", "-h":
		fmt.Fprint(stdout, tokenizerUsage)
		return 0
	case "encode", "decode", "render":
	default:
		fmt.Fprintf(stderr, "smg tokenizer: unknown command %q: use encode, decode or render\n", verb)
		return 2
	}
	var modelPath string
	var addSpecial, skipSpecial bool
	fs := cli.NewFlagSet("smg tokenizer " + verb)
	fs.String("model-path", &modelPath, "", "Model directory with tokenizer.json and tokenizer_config.json").WithMetavar("DIR")
	fs.Bool("add-special-tokens", &addSpecial, false, "encode: add the post-processor's special tokens (BOS/EOS) as the engine would for a raw prompt")
	fs.Bool("skip-special-tokens", &skipSpecial, false, "decode: leave special tokens out of the text")
	for _, a := range args[1:] {
		if a == "--help" || a == "-h" {
			fmt.Fprintf(stdout, "%s\nFlags:\n%s", tokenizerUsage, fs.Help())
			return 0
		}
	}
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(stderr, "smg tokenizer: %v\n", err)
		return 2
	}
	if modelPath == "" {
		fmt.Fprintln(stderr, "smg tokenizer: --model-path is required: give the directory holding tokenizer.json")
		return 2
	}
	tok, err := tokenizer.Load(modelPath)
	if err != nil {
		fmt.Fprintf(stderr, "smg tokenizer: %v\n", err)
		return 2
	}
	step, err := tokenizerStep(verb, modelPath, tok, addSpecial, skipSpecial)
	if err != nil {
		fmt.Fprintf(stderr, "smg tokenizer: %v\n", err)
		return 2
	}
	if err := eachLine(stdin, stdout, step); err != nil {
		fmt.Fprintf(stderr, "smg tokenizer %s: %v\n", verb, err)
		return 1
	}
	return 0
}

// lineStep turns one input line into its output line, appended to out.
type lineStep func(line, out []byte) ([]byte, error)

// tokenizerStep is the work of one verb of `smg tokenizer` on one line.
func tokenizerStep(verb, modelPath string, tok *tokenizer.Tokenizer, addSpecial, skipSpecial bool) (lineStep, error) {
	switch verb {
	case "encode":
		var ids []uint32
		return func(line, out []byte) ([]byte, error) {
			var text string
			if err := json.Unmarshal(line, &text); err != nil {
				return out, errors.New("want one JSON string per line")
			}
			ids = tok.Encode(ids[:0], text, addSpecial)
			return appendIDs(out, ids), nil
		}, nil
	case "decode":
		var text []byte
		return func(line, out []byte) ([]byte, error) {
			var ids []uint32
			if err := json.Unmarshal(line, &ids); err != nil {
				return out, errors.New("want one JSON array of token ids (integers 0..4294967295) per line")
			}
			for _, id := range ids {
				if int(id) >= tok.VocabSize() {
					return out, fmt.Errorf("token id %d is outside the vocabulary (size %d)", id, tok.VocabSize())
				}
			}
			text = tok.Decode(text[:0], ids, skipSpecial)
			return appendJSONString(out, string(text)), nil
		}, nil
	case "render":
		config, err := os.ReadFile(filepath.Join(modelPath, "tokenizer_config.json"))
		if err != nil {
			return nil, fmt.Errorf("cannot read the chat template: %w", err)
		}
		tmpl, err := chat.FromTokenizerConfig(config)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(modelPath, "tokenizer_config.json"), err)
		}
		var prompt []byte
		return func(line, out []byte) ([]byte, error) {
			req, err := chat.DecodeRequest(line)
			if err != nil {
				return out, err
			}
			if prompt, err = tmpl.Render(prompt[:0], req); err != nil {
				return out, err
			}
			return appendJSONString(out, string(prompt)), nil
		}, nil
	}
	return nil, fmt.Errorf("unknown command %q: use encode, decode or render", verb)
}

// eachLine runs step on every non-empty stdin line and writes its output line.
func eachLine(stdin io.Reader, stdout io.Writer, step lineStep) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	var out []byte
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var err error
		if out, err = step(sc.Bytes(), out[:0]); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, '\n')
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read stdin: %w (lines are limited to 64 MiB)", err)
	}
	return nil
}

func appendIDs(out []byte, ids []uint32) []byte {
	out = append(out, '[')
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(id), 10)
	}
	return append(out, ']')
}

// appendJSONString appends s as a JSON string, non-ASCII kept as UTF-8 (readable in a
// terminal) and invalid UTF-8 replaced by U+FFFD, as encoding/json does.
func appendJSONString(out []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<|im_start|>" stays readable
	_ = enc.Encode(s)        // a string always encodes
	return append(out, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}
