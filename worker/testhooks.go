package worker

import "github.com/smg-go/smg/worker/internal/testhooks"

// The bookkeeping methods, unexported, reach worker/workertest through testhooks.
func init() {
	testhooks.Set(testhooks.Notes[*Worker]{
		Dispatch:    (*Worker).noteDispatch,
		Awaiting:    (*Worker).noteAwaiting,
		FirstToken:  (*Worker).noteFirstToken,
		Sent:        (*Worker).noteSent,
		FirstByte:   (*Worker).noteFirstByte,
		NoFirstByte: (*Worker).noteNoFirstByte,
		Decode:      (*Worker).noteDecode,
	})
}
