package sdk

// The decode functions of the hook request fields beyond the pod: a
// Validate request's config, a PreUpdate request's resources. They are
// written by hand rather than by gendecode: their types are abi's (aliased
// here), whose field types name abi's types, and abi's Resources is
// LinuxResources here (sdk.Resources is a Parts constant). They follow the
// decoder's rules like the generated ones; the root module's
// internal/sdkdecode checks them against encoding/json.

// setNew assigns a pointer field with set, a new target allocated when it
// is nil; null sets it to nil.
func setNew[T any](d *decoder, p **T, set func(*decoder, *T)) {
	if d.null() {
		*p = nil
		return
	}
	if *p == nil {
		*p = new(T)
	}
	set(d, *p)
}

// decodeContainerConfig decodes a ContainerConfig into *v.
func decodeContainerConfig(d *decoder, v *ContainerConfig) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "image":
			d.setStr(&v.Image)
		case "env":
			decodeArray(d, &v.Env, &d.envs, 16, decodeEnvVar)
		case "labels":
			d.setStringMap(&v.Labels, false)
		case "annotations":
			d.setStringMap(&v.Annotations, false)
		case "mounts":
			decodeSlice(d, &v.Mounts, decodeMount)
		case "devices":
			decodeSlice(d, &v.Devices, decodeDevice)
		case "cdiDevices":
			d.setStrings(&v.CDIDevices)
		case "resources":
			setNew(d, &v.Resources, decodeLinuxResources)
		case "oomScoreAdj":
			setPtr(d, &v.OOMScoreAdj, &d.ints, (*decoder).setInt64)
		case "owners":
			d.setStringMap(&v.Owners, false)
		default:
			d.skip()
		}
	}
}

// decodeSlice decodes a JSON array into *p, each element with each, growing
// the slice in place like the generated code does for small slices.
func decodeSlice[T any](d *decoder, p *[]T, each func(*decoder, *T)) {
	s, isNull := (*p)[:0], false
	for n := 0; d.elem(&n, &isNull); {
		each(d, grow(&s))
	}
	*p = finishSlice(s, isNull, d.err)
}

// decodeMount decodes a Mount into *v.
func decodeMount(d *decoder, v *Mount) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "hostPath":
			d.setStr(&v.HostPath)
		case "containerPath":
			d.setStr(&v.ContainerPath)
		case "readOnly":
			d.setBool(&v.ReadOnly)
		case "propagation":
			d.setStr((*string)(&v.Propagation))
		default:
			d.skip()
		}
	}
}

// decodeDevice decodes a Device into *v.
func decodeDevice(d *decoder, v *Device) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "hostPath":
			d.setStr(&v.HostPath)
		case "containerPath":
			d.setStr(&v.ContainerPath)
		case "permissions":
			d.setStr(&v.Permissions)
		default:
			d.skip()
		}
	}
}

// decodeHugepageLimit decodes a HugepageLimit into *v.
func decodeHugepageLimit(d *decoder, v *HugepageLimit) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "pageSize":
			d.setStr(&v.PageSize)
		case "limit":
			d.setUint64(&v.Limit)
		default:
			d.skip()
		}
	}
}

// decodeLinuxResources decodes LinuxResources into *v.
func decodeLinuxResources(d *decoder, v *LinuxResources) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "cpuShares":
			setPtr(d, &v.CPUShares, &d.ints, (*decoder).setInt64)
		case "cpuQuota":
			setPtr(d, &v.CPUQuota, &d.ints, (*decoder).setInt64)
		case "cpuPeriod":
			setPtr(d, &v.CPUPeriod, &d.ints, (*decoder).setInt64)
		case "cpusetCpus":
			d.setStr(&v.CpusetCPUs)
		case "cpusetMems":
			d.setStr(&v.CpusetMems)
		case "memoryLimitBytes":
			setPtr(d, &v.MemoryLimitBytes, &d.ints, (*decoder).setInt64)
		case "hugepageLimits":
			decodeSlice(d, &v.HugepageLimits, decodeHugepageLimit)
		default:
			d.skip()
		}
	}
}
