// httpget.go — the Go client of tests/e2e/36-client-matrix.t: net/http with
// default settings (the Go resolver, Happy Eyeballs dialer). Prints per URL
// "<status> <hostname> <peer>" (peer: the connection's RemoteAddr, which Go
// takes from getpeername) or "ERR <why>".
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"regexp"
	"time"
)

func main() {
	host := regexp.MustCompile(`"hostname":"([^"]*)"`)
	c := &http.Client{Timeout: 5 * time.Second}
	for _, u := range os.Args[1:] {
		peer := "?"
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			peer = i.Conn.RemoteAddr().(*net.TCPAddr).String()
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", u, nil)
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println("ERR", err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := "?"
		if m := host.FindSubmatch(b); m != nil {
			h = string(m[1])
		}
		fmt.Println(resp.StatusCode, h, peer)
	}
}
