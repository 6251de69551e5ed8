package kubeletapi

import (
	"fmt"
	"net/url"
	"time"

	v1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// parseLogOptions decodes the query of a /containerLogs request into
// v1.PodLogOptions as the kubelet does (the v1 query parameter conversion,
// with "tail" accepted for tailLines and tail=all meaning no limit) and
// validates it as the kubelet does (the v1 ValidatePodLogOptions, stream
// selection allowed). The error is the message of a 400 answer.
func parseLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	q = cloneValues(q)
	if tail := q.Get("tail"); tail != "" {
		q["tailLines"] = []string{tail}
		if tail == "all" {
			delete(q, "tailLines")
		}
	}
	o := &v1.PodLogOptions{}
	var errs []error
	boolParam := func(name string, out *bool) {
		if v, ok := q[name]; ok && len(v) > 0 {
			if err := runtime.Convert_Slice_string_To_bool(&v, out, nil); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	intParam := func(name string, out **int64) {
		if v, ok := q[name]; ok && len(v) > 0 {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, out, nil); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	boolParam("follow", &o.Follow)
	boolParam("previous", &o.Previous)
	boolParam("timestamps", &o.Timestamps)
	boolParam("insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend)
	intParam("sinceSeconds", &o.SinceSeconds)
	intParam("tailLines", &o.TailLines)
	intParam("limitBytes", &o.LimitBytes)
	if v, ok := q["sinceTime"]; ok && len(v) > 0 {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, &o.SinceTime, nil); err != nil {
			errs = append(errs, fmt.Errorf("sinceTime: %w", err))
		}
	}
	if v, ok := q["stream"]; ok && len(v) > 0 {
		stream := v[0]
		o.Stream = &stream
	}
	o.Container = q.Get("container")
	if len(errs) > 0 {
		return nil, fmt.Errorf("unable to decode query: %v", errs)
	}
	if err := validateLogOptions(o).ToAggregate(); err != nil {
		return nil, fmt.Errorf("invalid request: %v", err)
	}
	return o, nil
}

func cloneValues(q url.Values) url.Values {
	c := make(url.Values, len(q))
	for k, v := range q {
		c[k] = v
	}
	return c
}

// validLogStreams are the values of PodLogOptions.Stream.
var validLogStreams = []string{v1.LogStreamStdout, v1.LogStreamStderr, v1.LogStreamAll}

// validateLogOptions is the v1 ValidatePodLogOptions with the API's error
// wording.
func validateLogOptions(o *v1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, apimachineryvalidation.IsNegativeErrorMsg))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.Stream != nil {
		switch *o.Stream {
		case v1.LogStreamStdout, v1.LogStreamStderr, v1.LogStreamAll:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("stream"), *o.Stream, validLogStreams))
		}
		if *o.Stream != v1.LogStreamAll && o.TailLines != nil {
			errs = append(errs, field.Forbidden(field.NewPath(""), "`tailLines` and specific `stream` are mutually exclusive for now"))
		}
	}
	return errs
}

// readOptionsFrom resolves o into the reader's options at now, as the
// kubelet: since is the later of now-sinceSeconds and sinceTime.
func readOptionsFrom(o *v1.PodLogOptions, now time.Time) readOptions {
	r := readOptions{tailLines: -1, follow: o.Follow, timestamps: o.Timestamps}
	if o.TailLines != nil {
		r.tailLines = *o.TailLines
	}
	if o.LimitBytes != nil {
		r.limitBytes = *o.LimitBytes
	}
	if o.SinceSeconds != nil {
		r.since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(r.since) {
		r.since = o.SinceTime.Time
	}
	return r
}
