package split

import "unicode"

func unicodeSimpleFold(r rune) rune { return unicode.SimpleFold(r) }
