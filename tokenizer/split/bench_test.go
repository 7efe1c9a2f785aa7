package split

import (
	"strings"
	"testing"
)

// benchTexts are about 64 KiB each.
var benchTexts = map[string]string{
	"english": repeatTo(`The quick brown fox jumps over the lazy dog. It's 2024, and we'll see what they're doing: "Hello, world!" said Bob's friend.
In 1969, Neil Armstrong walked on the Moon; that's one small step for man, one giant leap for mankind.   Numbers like 3.14159 and 1,234,567 appear too.
`, 64<<10),
	"chinese": repeatTo("自然语言处理是人工智能的一个重要分支，它研究如何让计算机理解和生成人类语言。今天的天气很好，我们去公园散步吧！2024年。\n", 64<<10),
	"code":    repeatTo("func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n\t\thttp.Error(w, err.Error(), 400)\n\t\treturn\n\t}\n\tfor i := 0; i < len(xs); i++ {\n\t\tsum += xs[i] * 2 // double\n\t}\n}\n", 64<<10),
}

func repeatTo(s string, n int) string {
	return strings.Repeat(s, n/len(s)+1)
}

func BenchmarkScan(b *testing.B) {
	for _, p := range allPatterns {
		for _, text := range []string{"english", "chinese", "code"} {
			s := benchTexts[text]
			b.Run(p.name+"/"+text+"/split", func(b *testing.B) {
				sc := mustCompile(b, p.pattern)
				b.SetBytes(int64(len(s)))
				b.ReportAllocs()
				for b.Loop() {
					it := NewPieces(sc, s)
					for _, _, _, ok := it.Next(); ok; _, _, _, ok = it.Next() {
					}
				}
			})
			b.Run(p.name+"/"+text+"/regexp2", func(b *testing.B) {
				re := compileRef(b, p.pattern)
				b.SetBytes(int64(len(s)))
				b.ReportAllocs()
				for b.Loop() {
					m, _ := re.FindStringMatch(s)
					for m != nil {
						m, _ = re.FindNextMatch(m)
					}
				}
			})
		}
	}
}
