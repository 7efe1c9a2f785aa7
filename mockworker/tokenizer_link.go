package mockworker

import "github.com/smg-go/smg/tokenizer"

// openTokenizer loads the tokenizer of a model directory with the gateway's own tokenizer,
// so the mock's answer ids are the ids a real engine of that model would send for its text.
func openTokenizer(dir string) (textCodec, error) {
	t, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return t, nil
}
