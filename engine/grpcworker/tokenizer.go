package grpcworker

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/smg-go/smg/engine/commonpb"
)

// Bounds of GetTokenizer's answer: the largest tokenizer.json files in use are tens of
// megabytes; an engine (or a man in the middle) must not make the gateway hold more.
const (
	MaxTokenizerArchiveBytes = 64 << 20
	MaxTokenizerFileBytes    = 128 << 20
)

// TokenizerFiles are the model's tokenizer files an engine sent; Config and Generation are
// nil when the archive has none.
type TokenizerFiles struct {
	Tokenizer, Config, Generation []byte
}

// GetTokenizerFiles downloads the engine's tokenizer (GetTokenizer: a zip archive streamed in
// pieces, its sha256 on the last) and returns tokenizer.json, tokenizer_config.json and
// generation_config.json from it. The archive's checksum must match, it must fit
// MaxTokenizerArchiveBytes and each file MaxTokenizerFileBytes, and it must hold
// tokenizer.json at its top level.
func (c *Client) GetTokenizerFiles(ctx context.Context) (TokenizerFiles, error) {
	if c.closed.Load() {
		return TokenizerFiles{}, ErrClosed
	}
	req := &commonpb.GetTokenizerRequest{}
	var stream interface {
		Recv() (*commonpb.GetTokenizerChunk, error)
	}
	var err error
	if c.dialect == VLLM {
		stream, err = c.vllm().GetTokenizer(ctx, req)
	} else {
		stream, err = c.sglang().GetTokenizer(ctx, req)
	}
	if err != nil {
		return TokenizerFiles{}, err
	}
	var archive []byte
	var sum string
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return TokenizerFiles{}, err
		}
		if len(archive)+len(chunk.GetData()) > MaxTokenizerArchiveBytes {
			return TokenizerFiles{}, fmt.Errorf("the tokenizer of grpc://%s is larger than %d MiB: give the gateway --tokenizer-path instead", c.addr, MaxTokenizerArchiveBytes>>20)
		}
		archive = append(archive, chunk.GetData()...)
		if s := chunk.GetSha256(); s != "" {
			sum = s
		}
	}
	return unpackTokenizer(archive, sum, MaxTokenizerFileBytes)
}

// unpackTokenizer checks a GetTokenizer archive against its sha256 (hex) and reads the
// tokenizer files from its top level, each at most maxFile bytes.
func unpackTokenizer(archive []byte, sum string, maxFile int) (TokenizerFiles, error) {
	got := sha256.Sum256(archive)
	if sum == "" || hex.EncodeToString(got[:]) != sum {
		return TokenizerFiles{}, fmt.Errorf("the engine's tokenizer archive does not match its sha256 (%q): retry, or give the gateway --tokenizer-path", sum)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return TokenizerFiles{}, fmt.Errorf("the engine's tokenizer archive is not a zip: %w", err)
	}
	var files TokenizerFiles
	for _, f := range zr.File {
		var dst *[]byte
		switch f.Name {
		case "tokenizer.json":
			dst = &files.Tokenizer
		case "tokenizer_config.json":
			dst = &files.Config
		case "generation_config.json":
			dst = &files.Generation
		default:
			continue // other files (vocab.json, merges.txt, special_tokens_map.json) are not read
		}
		if *dst, err = readZipFile(f, maxFile); err != nil {
			return TokenizerFiles{}, err
		}
	}
	if files.Tokenizer == nil {
		return TokenizerFiles{}, errors.New("the engine's tokenizer archive has no tokenizer.json (a model with only a slow tokenizer): give the gateway --tokenizer-path with a tokenizer.json")
	}
	return files, nil
}

func readZipFile(f *zip.File, maxFile int) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("the engine's tokenizer archive: %s: %w", f.Name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, int64(maxFile)+1))
	if err != nil {
		return nil, fmt.Errorf("the engine's tokenizer archive: %s: %w", f.Name, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("the engine's tokenizer archive: %s is larger than %d bytes", f.Name, maxFile)
	}
	return b, nil
}
