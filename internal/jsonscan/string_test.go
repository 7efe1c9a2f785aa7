package jsonscan

import "testing"

// TestByteClassScans checks the SWAR scans against a byte-at-a-time definition: every
// byte value at every position of an 80-byte window (covering the 64-byte step, the
// 8-byte step and the tail), over backgrounds of ordinary bytes at the edges of the
// classes, followed by a second special byte to catch borrow false positives.
func TestByteClassScans(t *testing.T) {
	special := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	control := func(c byte) bool { return c < 0x20 }
	// first returns the index of the first byte of class in w, which holds bg but for
	// c at pos and after at pos+1, or len(w); or -1 for none within limit.
	first := func(class func(byte) bool, c, after byte, pos, n, none int) int {
		switch {
		case class(c):
			return pos
		case pos+1 < n && class(after):
			return pos + 1
		}
		return none
	}
	var w [80]byte
	for _, bg := range []byte{'a', ' ', '!', '#', '[', ']', 0x7f, 0x80, 0xff} {
		for pos := range len(w) {
			for c := range 256 {
				for _, after := range []byte{bg, 0, '"'} {
					for i := range w {
						w[i] = bg
					}
					w[pos] = byte(c)
					if pos+1 < len(w) {
						w[pos+1] = after
					}
					if pos < 16 {
						want := first(special, byte(c), after, pos, 16, -1)
						if got := firstSpecial(w[:], 0); got != want {
							t.Fatalf("firstSpecial(% x) = %d, want %d", w[:16], got, want)
						}
					}
					want := first(control, byte(c), after, pos, len(w), len(w))
					if got := nextControl(w[:], 0, len(w)); got != want {
						t.Fatalf("nextControl(% x) = %d, want %d", w, got, want)
					}
				}
			}
		}
	}
}
