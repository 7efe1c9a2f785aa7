module github.com/smg-go/smg

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/valyala/fasthttp v1.79.0
	github.com/valyala/fastjson v1.6.10
	github.com/zeebo/xxh3 v1.1.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/panjf2000/ants/v2 v2.11.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)
