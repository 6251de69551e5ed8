package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the CNCF Wasm OCI artifact
// (https://tag-runtime.cncf.io/wgs/wasm/deliverables/wasm-oci-artifact/).
const (
	// LayerMediaType is the media type of a layer that is a Wasm module
	// in the artifact's earlier drafts (and containerd's runwasi).
	LayerMediaType = "application/vnd.wasm.content.layer.v1+wasm"
	// ModuleMediaType is the media type of a Wasm layer in the artifact
	// as published, and of the module layer `wasmlet plugin push` writes.
	ModuleMediaType = "application/wasm"
	// ConfigMediaType is the media type of a Wasm artifact's config.
	ConfigMediaType = "application/vnd.wasm.config.v0+json"
)

// maxModuleSize bounds what an import reads into memory.
const maxModuleSize = 512 << 20

// sourceMeta is what an OCI image adds to the module.
type sourceMeta struct {
	entrypoint, cmd []string
}

// readSource reads a module from a .wasm file, an OCI image layout
// directory or an image tarball.
func readSource(path string) ([]byte, sourceMeta, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, sourceMeta{}, err
	}
	if fi.IsDir() {
		if _, err := os.Stat(path + "/index.json"); err != nil {
			return nil, sourceMeta{}, errors.New("directory is not an OCI image layout (no index.json)")
		}
		img, err := layoutImage(layout.Path(path))
		if err != nil {
			return nil, sourceMeta{}, fmt.Errorf("OCI layout: %w", err)
		}
		return moduleOf(img)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, sourceMeta{}, err
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if bytes.Equal(head[:n], wasmMagic) {
		b, err := io.ReadAll(io.LimitReader(io.MultiReader(bytes.NewReader(head), f), maxModuleSize+1))
		if err != nil {
			return nil, sourceMeta{}, err
		}
		if len(b) > maxModuleSize {
			return nil, sourceMeta{}, fmt.Errorf("module larger than %d bytes", maxModuleSize)
		}
		return b, sourceMeta{}, nil
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return nil, sourceMeta{}, fmt.Errorf("it is neither a Wasm module (no \\0asm header) nor an image tarball: %w", err)
	}
	mod, meta, err := moduleOf(img)
	if err != nil {
		// A Wasm artifact's config has no rootfs, from which the tarball
		// reader lists an image's layers: read the layers manifest.json
		// names instead.
		if b, ok := tarballModule(path); ok {
			return b, meta, nil
		}
	}
	return mod, meta, err
}

// tarballModule returns the first layer file that manifest.json of a
// `docker save` tarball names whose content is a Wasm module.
func tarballModule(path string) ([]byte, bool) {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil || len(m) == 0 {
		return nil, false
	}
	for _, name := range m[0].Layers {
		f, err := opener()
		if err != nil {
			return nil, false
		}
		b, err := tarFile(f, name)
		f.Close()
		if err == nil && bytes.HasPrefix(b, wasmMagic) {
			return b, true
		}
	}
	return nil, false
}

// tarFile reads the entry name of the tar stream r, at most maxModuleSize.
func tarFile(r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, err
		}
		if h.Name != name {
			continue
		}
		if h.Size > maxModuleSize {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, maxModuleSize)
		}
		return io.ReadAll(io.LimitReader(tr, maxModuleSize))
	}
}

// layoutImage returns the first image of a layout's index, descending into
// nested indexes.
func layoutImage(p layout.Path) (v1.Image, error) {
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	return firstImage(idx, 0)
}

func firstImage(idx v1.ImageIndex, depth int) (v1.Image, error) {
	if depth > 4 {
		return nil, errors.New("image indexes nested too deep")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := firstImage(child, depth+1); err == nil {
				return img, nil
			}
		default:
			return idx.Image(d.Digest)
		}
	}
	return nil, errors.New("no image manifest in the index")
}

// moduleOf returns the image's Wasm layer: the first layer whose content is
// a Wasm module, whatever its media type; a layer of the Wasm layer media
// type whose content is not one is an error.
func moduleOf(img v1.Image) ([]byte, sourceMeta, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, sourceMeta{}, err
	}
	var meta sourceMeta
	if cf, err := img.ConfigFile(); err == nil && cf != nil {
		meta.entrypoint, meta.cmd = cf.Config.Entrypoint, cf.Config.Cmd
	}
	var mediaTypes []string
	for _, l := range layers {
		mt, _ := l.MediaType()
		mediaTypes = append(mediaTypes, string(mt))
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, sourceMeta{}, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxModuleSize+1))
		rc.Close()
		if err != nil {
			return nil, sourceMeta{}, err
		}
		if bytes.HasPrefix(b, wasmMagic) && len(b) <= maxModuleSize {
			return b, meta, nil
		}
		if mt == LayerMediaType || mt == ModuleMediaType {
			return nil, sourceMeta{}, fmt.Errorf("layer of type %s is not a Wasm module", mt)
		}
	}
	return nil, sourceMeta{}, fmt.Errorf("no Wasm module among %d layers (media types %s)", len(layers), strings.Join(mediaTypes, ", "))
}
