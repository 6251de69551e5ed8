package kubeletapi

import (
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseLogOptions(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	tests := []struct {
		query   string
		want    v1.PodLogOptions
		wantErr string
	}{
		{query: "", want: v1.PodLogOptions{}},
		{query: "follow=true&previous=0&timestamps&tailLines=10&limitBytes=100&sinceSeconds=5",
			want: v1.PodLogOptions{Follow: true, Timestamps: true, TailLines: i64(10), LimitBytes: i64(100), SinceSeconds: i64(5)}},
		{query: "previous=FALSE&follow=1", want: v1.PodLogOptions{Follow: true}},
		{query: "tail=5", want: v1.PodLogOptions{TailLines: i64(5)}},
		{query: "tail=all&tailLines=3", want: v1.PodLogOptions{}},
		{query: "stream=Stdout", want: v1.PodLogOptions{Stream: str(v1.LogStreamStdout)}},
		{query: "stream=All&tailLines=2", want: v1.PodLogOptions{Stream: str(v1.LogStreamAll), TailLines: i64(2)}},
		{query: "tailLines=abc", wantErr: "unable to decode query: [tailLines: "},
		{query: "sinceTime=yesterday", wantErr: "unable to decode query: [sinceTime: "},
		{query: "tailLines=-1", wantErr: "invalid request: tailLines: Invalid value: -1: must be greater than or equal to 0"},
		{query: "limitBytes=0", wantErr: "invalid request: limitBytes: Invalid value: 0: must be greater than 0"},
		{query: "sinceSeconds=0", wantErr: "invalid request: sinceSeconds: Invalid value: 0: must be greater than 0"},
		{query: "sinceSeconds=1&sinceTime=2024-01-01T00:00:00Z", wantErr: "at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{query: "stream=Nope", wantErr: `invalid request: stream: Unsupported value: "Nope"`},
		{query: "stream=Stderr&tailLines=1", wantErr: "`tailLines` and specific `stream` are mutually exclusive for now"},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseLogOptions(q)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want it to contain %q", tt.query, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.query, err)
			continue
		}
		if !equalLogOptions(*got, tt.want) {
			t.Errorf("%q: got %+v, want %+v", tt.query, *got, tt.want)
		}
	}
}

func equalLogOptions(a, b v1.PodLogOptions) bool {
	eqI := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqS := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Follow == b.Follow && a.Previous == b.Previous && a.Timestamps == b.Timestamps &&
		eqI(a.TailLines, b.TailLines) && eqI(a.LimitBytes, b.LimitBytes) && eqI(a.SinceSeconds, b.SinceSeconds) &&
		eqS(a.Stream, b.Stream) && (a.SinceTime == nil) == (b.SinceTime == nil)
}

func TestParseLogOptions_sinceTime(t *testing.T) {
	got, err := parseLogOptions(url.Values{"sinceTime": {"2024-01-01T00:00:03.5Z"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.SinceTime == nil || !got.SinceTime.Time.Equal(ts("2024-01-01T00:00:03.5Z")) {
		t.Errorf("got %v", got.SinceTime)
	}
}

func TestReadOptionsFrom(t *testing.T) {
	now := ts("2024-01-01T01:00:00Z")
	ten, two := int64(10), int64(2)
	r := readOptionsFrom(&v1.PodLogOptions{SinceSeconds: &ten, TailLines: &two, LimitBytes: &ten, Follow: true, Timestamps: true}, now)
	want := readOptions{tailLines: 2, limitBytes: 10, since: now.Add(-10 * time.Second), follow: true, timestamps: true}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	st := metav1.NewTime(ts("2024-01-01T00:30:00Z"))
	if r := readOptionsFrom(&v1.PodLogOptions{SinceTime: &st}, now); !r.since.Equal(st.Time) || r.tailLines != -1 {
		t.Errorf("got %+v", r)
	}
}
