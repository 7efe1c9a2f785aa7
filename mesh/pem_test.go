package mesh

import (
	"encoding/pem"
	"os"
)

func writeFile(file, typ string, der []byte) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
