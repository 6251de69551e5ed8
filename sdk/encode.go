package sdk

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/wasmlet/wasmlet/abi"
)

// encoder appends JSON to a byte slice, without reflection. Output matches
// encoding/json's for the same values (sorted map keys, invalid UTF-8 as
// U+FFFD), minus its HTML escaping, which a plugin response does not need.
type encoder struct {
	b     []byte
	comma bool // a member was written in the current object
}

func (e *encoder) open() {
	e.b = append(e.b, '{')
	e.comma = false
}

func (e *encoder) close() {
	e.b = append(e.b, '}')
	e.comma = true
}

// key writes a member name and its colon.
func (e *encoder) key(k string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
	e.comma = true
}

// field writes "k":"v", or nothing when v is empty (omitempty).
func (e *encoder) field(k, v string) {
	if v != "" {
		e.key(k)
		e.str(v)
	}
}

const hexDigits = "0123456789abcdef"

// str writes a JSON string.
func (e *encoder) str(s string) {
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}

// mapField writes "k":{…} with sorted keys, or nothing when m is empty
// (omitempty).
func (e *encoder) mapField(k string, m map[string]string) {
	if len(m) > 0 {
		e.key(k)
		e.strMap(m)
	}
}

// strMap writes an object with sorted keys.
func (e *encoder) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.open()
	for _, k := range keys {
		if e.comma {
			e.b = append(e.b, ',')
		}
		e.str(k)
		e.b = append(e.b, ':')
		e.str(m[k])
		e.comma = true
	}
	e.close()
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, "true"...)
	} else {
		e.b = append(e.b, "false"...)
	}
	e.comma = true
}

func (e *encoder) int(v int64) {
	e.b = strconv.AppendInt(e.b, v, 10)
	e.comma = true
}

func (e *encoder) uint(v uint64) {
	e.b = strconv.AppendUint(e.b, v, 10)
	e.comma = true
}

func (e *encoder) bytes(v []byte) {
	e.b = append(e.b, '"')
	e.b = base64.StdEncoding.AppendEncode(e.b, v)
	e.b = append(e.b, '"')
	e.comma = true
}

// encodeVerdict encodes an abi.AdmitResponse.
func encodeVerdict(v Verdict, err error) []byte {
	e := encoder{b: make([]byte, 0, 64+len(v.Reason)+len(v.Message))}
	e.open()
	e.key("allowed")
	e.bool(v.Allowed && err == nil)
	if err != nil {
		e.field("error", err.Error())
	} else {
		e.field("reason", v.Reason)
		e.field("message", v.Message)
	}
	e.close()
	return e.b
}

// encodeError encodes the response of kind with only its error set.
func encodeError(kind abi.Kind, msg string) []byte {
	e := encoder{}
	e.open()
	if kind == abi.KindAdmission {
		e.key("allowed")
		e.bool(false)
	}
	e.field("error", msg)
	e.close()
	return e.b
}

// encodeSourceResult encodes an abi.SourceResponse. Pods must be valid JSON;
// an invalid one turns the response into an error naming it.
func encodeSourceResult(r SourceResult, err error) []byte {
	if err != nil {
		return encodeError(abi.KindSource, err.Error())
	}
	e := encoder{}
	e.open()
	if len(r.Updates) > 0 {
		e.key("updates")
		e.b = append(e.b, '[')
		for i, u := range r.Updates {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.open()
			e.key("op")
			e.str(string(u.Op))
			e.key("pods")
			e.b = append(e.b, '[')
			for j, p := range u.Pods {
				if j > 0 {
					e.b = append(e.b, ',')
				}
				if !validJSON(p) {
					return encodeError(abi.KindSource, "update "+strconv.Itoa(i)+": pod "+strconv.Itoa(j)+" is not valid JSON")
				}
				e.b = append(e.b, p...)
			}
			e.b = append(e.b, ']')
			e.close()
		}
		e.b = append(e.b, ']')
	}
	if ms := r.NextPoll.Milliseconds(); ms != 0 {
		e.key("nextPollMillis")
		e.int(ms)
	}
	e.close()
	return e.b
}

// validJSON reports whether b is one JSON value.
func validJSON(b []byte) bool {
	d := decoder{buf: b}
	d.skip()
	return d.end() == nil
}

// encodeHookResult encodes an abi.HookResponse: a Refusal at Validate as
// its refuse field, any other error (a refusal elsewhere too) as its error.
func encodeHookResult(point HookPoint, a Adjustment, err error) []byte {
	if err != nil {
		if msg, ok := refusal(err); ok && point == abi.HookValidate {
			e := encoder{}
			e.open()
			e.key("refuse")
			e.str(msg)
			e.close()
			return e.b
		}
		return encodeError(abi.KindHook, err.Error())
	}
	e := encoder{}
	e.open()
	if !a.Empty() {
		e.key("adjustment")
		e.adjustment(&a)
	}
	e.close()
	return e.b
}

// adjustment writes an abi.Adjustment's object, its fields in declaration
// order and empty ones left out, as encoding/json writes it.
func (e *encoder) adjustment(a *Adjustment) {
	e.open()
	if len(a.Env) > 0 {
		e.key("env")
		e.list(len(a.Env), func(i int) {
			e.open()
			e.key("name")
			e.str(a.Env[i].Name)
			e.key("value")
			e.str(a.Env[i].Value)
			e.close()
		})
	}
	e.mapField("labels", a.Labels)
	e.mapField("annotations", a.Annotations)
	if len(a.Mounts) > 0 {
		e.key("mounts")
		e.list(len(a.Mounts), func(i int) {
			m := &a.Mounts[i]
			e.open()
			e.key("hostPath")
			e.str(m.HostPath)
			e.key("containerPath")
			e.str(m.ContainerPath)
			if m.ReadOnly {
				e.key("readOnly")
				e.bool(true)
			}
			e.field("propagation", string(m.Propagation))
			e.close()
		})
	}
	if len(a.Devices) > 0 {
		e.key("devices")
		e.list(len(a.Devices), func(i int) {
			d := &a.Devices[i]
			e.open()
			e.key("hostPath")
			e.str(d.HostPath)
			e.field("containerPath", d.ContainerPath)
			e.field("permissions", d.Permissions)
			e.close()
		})
	}
	if len(a.CDIDevices) > 0 {
		e.key("cdiDevices")
		e.list(len(a.CDIDevices), func(i int) { e.str(a.CDIDevices[i]) })
	}
	if a.Resources != nil {
		e.key("resources")
		e.resources(a.Resources)
	}
	if a.OOMScoreAdj != nil {
		e.key("oomScoreAdj")
		e.int(*a.OOMScoreAdj)
	}
	e.mapField("sysctls", a.Sysctls)
	if r := a.Remove; r != nil {
		e.key("remove")
		e.open()
		for _, f := range []struct {
			key  string
			list []string
		}{{"env", r.Env}, {"mounts", r.Mounts}, {"annotations", r.Annotations}} {
			if len(f.list) > 0 {
				e.key(f.key)
				e.list(len(f.list), func(i int) { e.str(f.list[i]) })
			}
		}
		e.close()
	}
	e.close()
}

// resources writes an abi.Resources object, unset fields left out.
func (e *encoder) resources(r *LinuxResources) {
	e.open()
	for _, f := range []struct {
		key string
		v   *int64
	}{{"cpuShares", r.CPUShares}, {"cpuQuota", r.CPUQuota}, {"cpuPeriod", r.CPUPeriod}} {
		if f.v != nil {
			e.key(f.key)
			e.int(*f.v)
		}
	}
	e.field("cpusetCpus", r.CpusetCPUs)
	e.field("cpusetMems", r.CpusetMems)
	if r.MemoryLimitBytes != nil {
		e.key("memoryLimitBytes")
		e.int(*r.MemoryLimitBytes)
	}
	if len(r.HugepageLimits) > 0 {
		e.key("hugepageLimits")
		e.list(len(r.HugepageLimits), func(i int) {
			e.open()
			e.key("pageSize")
			e.str(r.HugepageLimits[i].PageSize)
			e.key("limit")
			e.uint(r.HugepageLimits[i].Limit)
			e.close()
		})
	}
	e.close()
}

// list writes a JSON array of n elements, each written by elem.
func (e *encoder) list(n int, elem func(i int)) {
	e.b = append(e.b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		elem(i)
	}
	e.b = append(e.b, ']')
	e.comma = true
}

// encodeHTTPRequest encodes an abi.HTTPRequest.
func encodeHTTPRequest(r HTTPRequest) []byte {
	e := encoder{}
	e.open()
	e.key("method")
	e.str(r.Method)
	e.key("url")
	e.str(r.URL)
	e.mapField("headers", r.Headers)
	if len(r.Body) > 0 {
		e.key("body")
		e.bytes(r.Body)
	}
	if r.TimeoutMillis != 0 {
		e.key("timeoutMillis")
		e.int(r.TimeoutMillis)
	}
	e.close()
	return e.b
}

// decodeHTTPResponse decodes an abi.HTTPResponse.
func decodeHTTPResponse(buf []byte) (HTTPResponse, error) {
	var r HTTPResponse
	d := decoder{buf: buf}
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "status":
			v, ok := d.integer(64)
			if ok {
				r.Status = int(v)
			}
		case "headers":
			d.setStringMap(&r.Headers, false)
		case "body":
			if d.null() {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(d.str())
			if err != nil {
				d.fail("body: " + err.Error())
			}
			r.Body = b
		case "error":
			d.setStr(&r.Error)
		default:
			d.skip()
		}
	}
	if err := d.end(); err != nil {
		return HTTPResponse{}, err
	}
	return r, nil
}

// decodeNodeInfo decodes an abi.NodeInfo.
func decodeNodeInfo(buf []byte) (NodeInfo, error) {
	var ni NodeInfo
	d := decoder{buf: buf}
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&ni.Name)
		case "labels":
			d.setStringMap(&ni.Labels, false)
		case "capacity":
			d.setStringMap(&ni.Capacity, false)
		case "allocatable":
			d.setStringMap(&ni.Allocatable, false)
		default:
			d.skip()
		}
	}
	if err := d.end(); err != nil {
		return NodeInfo{}, err
	}
	return ni, nil
}
