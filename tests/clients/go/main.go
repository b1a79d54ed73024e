// rueidis's client-side cache (DoCache) against a server on the port given: a second read is
// served from the cache, and another client's write invalidates it so the next read returns
// the new value. Exits non-zero on any failure.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/rueidis"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	addr := "127.0.0.1:" + os.Args[1]
	ctx := context.Background()
	cached, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableRetry: true})
	if err != nil {
		fail("connect: %v", err)
	}
	defer cached.Close()
	other, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fail("connect: %v", err)
	}
	defer other.Close()

	if err := other.Do(ctx, other.B().Set().Key("go:csc").Value("v1").Build()).Error(); err != nil {
		fail("set: %v", err)
	}
	read := func() (string, bool) {
		r := cached.DoCache(ctx, cached.B().Get().Key("go:csc").Cache(), time.Minute)
		v, err := r.ToString()
		if err != nil {
			fail("get: %v", err)
		}
		return v, r.IsCacheHit()
	}
	if v, hit := read(); v != "v1" || hit {
		fail("first read: %q hit=%v", v, hit)
	}
	if v, hit := read(); v != "v1" || !hit {
		fail("second read should be a cache hit: %q hit=%v", v, hit)
	}
	if err := other.Do(ctx, other.B().Set().Key("go:csc").Value("v2").Build()).Error(); err != nil {
		fail("set: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		v, _ := read()
		if v == "v2" {
			break
		}
		if time.Now().After(deadline) {
			fail("invalidation never arrived (still %q)", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("rueidis DoCache: hit and invalidation ok")
}
