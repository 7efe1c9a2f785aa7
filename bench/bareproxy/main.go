// Command bareproxy is the reference the gateway's overhead is measured against: the smallest
// useful fasthttp reverse proxy (one HostClient per worker, round robin, the client's request
// object forwarded as is, the answer read whole). It has no routing, no metrics, no error
// handling: whatever the gateway costs beyond it is the price of its features.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	workers := flag.String("workers", "", "comma-separated worker host:port list")
	flag.Parse()
	var clients []*fasthttp.HostClient
	for _, w := range strings.Split(*workers, ",") {
		if w = strings.TrimPrefix(strings.TrimSpace(w), "http://"); w != "" {
			clients = append(clients, &fasthttp.HostClient{Addr: w, MaxConns: 4096})
		}
	}
	if len(clients) == 0 {
		fmt.Fprintln(os.Stderr, "bareproxy: --workers is required")
		os.Exit(2)
	}
	var next atomic.Uint64
	handler := func(ctx *fasthttp.RequestCtx) {
		c := clients[next.Add(1)%uint64(len(clients))]
		ctx.Request.SetHost(c.Addr)
		if err := c.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bareproxy listening on http://%s\n", ln.Addr())
	log.Fatal(fasthttp.Serve(ln, handler))
}
