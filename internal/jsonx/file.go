package jsonx

import (
	"encoding/json"
	"fmt"
	"os"
)

// ReadFile reads the JSON document in path into a new T; its errors call the file what
// (a "result", a "baseline").
func ReadFile[T any](path, what string) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("cannot parse %s %s: %w", what, path, err)
	}
	return v, nil
}
