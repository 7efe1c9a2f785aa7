module github.com/valyala/fasthttp

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/molecule-man/go-brrr v1.3.1
	github.com/valyala/bytebufferpool v1.0.0
	golang.org/x/crypto v0.58.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.43.0 // indirect
