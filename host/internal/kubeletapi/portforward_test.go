package kubeletapi

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/transport/spdy"
)

func TestParsePorts(t *testing.T) {
	tests := []struct {
		values  []string
		want    []int32
		wantErr bool
	}{
		{values: nil, want: nil},
		{values: []string{"80"}, want: []int32{80}},
		{values: []string{"80", "8080,9090"}, want: []int32{80, 8080, 9090}},
		{values: []string{"1", "65535"}, want: []int32{1, 65535}},
		{values: []string{""}, wantErr: true},
		{values: []string{"0"}, wantErr: true},
		{values: []string{"65536"}, wantErr: true},
		{values: []string{"-1"}, wantErr: true},
		{values: []string{"http"}, wantErr: true},
		{values: []string{"80,"}, wantErr: true},
		{values: []string{"80", ""}, wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseForwardPorts(tc.values)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseForwardPorts(%q) = %v, %v; want %v, error %v", tc.values, got, err, tc.want, tc.wantErr)
		}
	}
}

// portForward speaks portforward.k8s.io: each data stream is echoed back,
// error streams stay silent.
func (f *fakeStreamServer) portForward(w http.ResponseWriter, r *http.Request) {
	conn, streams := upgradeStream(w, r, "portforward.k8s.io")
	if conn == nil {
		return
	}
	defer conn.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case s := <-streams:
			if s.Headers().Get(v1.StreamType) != v1.StreamTypeData {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := io.ReadAll(s)
				s.Write([]byte(s.Headers().Get(v1.PortHeader) + ":" + string(b)))
				s.Close()
			}()
		case <-conn.CloseChan():
			return
		case <-r.Context().Done():
			return
		}
	}
}

// TestStreaming_portForwardOverSPDY forwards two ports as the API server
// does towards the kubelet: one SPDY connection, a pair of streams (error,
// data) per port named in the streams' headers.
func TestStreaming_portForwardOverSPDY(t *testing.T) {
	e := startStreaming(t)
	rt, upgrader, err := spdy.RoundTripperFor(e.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "https", Host: e.addr, Path: "/portForward/default/web", RawQuery: "port=80&port=8080"}
	conn, proto, err := spdy.NewDialer(upgrader, &http.Client{Transport: rt, Timeout: deadline}, http.MethodPost, u).Dial("portforward.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if proto != "portforward.k8s.io" {
		t.Errorf("protocol = %q", proto)
	}
	for i, port := range []int{80, 8080} {
		h := http.Header{}
		h.Set(v1.StreamType, v1.StreamTypeError)
		h.Set(v1.PortHeader, strconv.Itoa(port))
		h.Set(v1.PortForwardRequestIDHeader, strconv.Itoa(i))
		errStream, err := conn.CreateStream(h)
		if err != nil {
			t.Fatal(err)
		}
		errStream.Close() // the client never writes to it
		h.Set(v1.StreamType, v1.StreamTypeData)
		data, err := conn.CreateStream(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := data.Write([]byte("ping " + strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		data.Close() // half-close: the echo ends
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(data)
			got <- string(b)
		}()
		select {
		case s := <-got:
			if want := strconv.Itoa(port) + ":ping " + strconv.Itoa(i); s != want {
				t.Errorf("port %d: echo %q, want %q", port, s, want)
			}
		case <-time.After(deadline):
			t.Fatalf("port %d: no echo", port)
		}
	}
	if got, want := e.st.lastCall(), "portforward default/web [80 8080]"; got != want {
		t.Errorf("runtime call = %s, want %s", got, want)
	}
	reqs := e.upstream.seen()
	if len(reqs) != 1 || reqs[0].URL.Path != "/portforward/session-token" || !httpstream.IsUpgradeRequest(reqs[0]) {
		t.Errorf("upstream saw %d requests: %v", len(reqs), reqs)
	}
	if a := e.lastAttributes(); a.GetVerb() != "create" || a.GetSubresource() != "proxy" {
		t.Errorf("authorized %+v", a)
	}
}
