package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// rawCodec passes messages through as bytes, so the proxy forwards every
// CRI method, streams included, without knowing its types.
type rawCodec struct{}

// frame is one message's bytes.
type frame struct{ b []byte }

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*frame).b, nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*frame).b = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

// Record is one recorded request: the CRI method and the request as
// protojson.
type Record struct {
	Method  string          `json:"method"`
	Request json.RawMessage `json:"request"`
}

// recorded are the methods whose requests are written: what an agent asks
// the runtime to make.
var recorded = map[string]func() proto.Message{
	"/runtime.v1.RuntimeService/RunPodSandbox":   func() proto.Message { return &runtimeapi.RunPodSandboxRequest{} },
	"/runtime.v1.RuntimeService/CreateContainer": func() proto.Message { return &runtimeapi.CreateContainerRequest{} },
}

// proxy forwards the CRI calls it serves on listen to the runtime at
// target, appending the recorded requests to out as JSON lines.
func proxy(ctx context.Context, listen, target string, out io.Writer) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	path := strings.TrimPrefix(listen, "unix://")
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	record := func(method string, b []byte) {
		newMsg, ok := recorded[method]
		if !ok {
			return
		}
		m := newMsg()
		if err := proto.Unmarshal(b, m); err != nil {
			fmt.Fprintf(os.Stderr, "cridiff: %s: %v\n", method, err)
			return
		}
		j, _ := protojson.Marshal(m)
		line, _ := json.Marshal(Record{Method: method, Request: j})
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(line, '\n'))
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(16<<20),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			method, _ := grpc.MethodFromServerStream(ss)
			md, _ := metadata.FromIncomingContext(ss.Context())
			cctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md))
			defer cancel()
			cs, err := conn.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
			if err != nil {
				return err
			}
			errc := make(chan error, 1)
			go func() { // client → runtime
				for {
					f := &frame{}
					if err := ss.RecvMsg(f); err != nil {
						if err == io.EOF {
							errc <- cs.CloseSend()
						} else {
							errc <- err
						}
						return
					}
					record(method, f.b)
					if err := cs.SendMsg(f); err != nil {
						errc <- err
						return
					}
				}
			}()
			// runtime → client
			if h, err := cs.Header(); err == nil {
				ss.SendHeader(h)
			}
			for {
				f := &frame{}
				if err := cs.RecvMsg(f); err != nil {
					ss.SetTrailer(cs.Trailer())
					if err == io.EOF {
						return nil
					}
					return err
				}
				if err := ss.SendMsg(f); err != nil {
					return err
				}
			}
		}))
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	return srv.Serve(l)
}
