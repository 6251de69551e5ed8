package wasiruntime

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

// imageServer is the CRI ImageService of a Runtime, over its image store.
type imageServer struct {
	runtimeapi.UnimplementedImageServiceServer
	r *Runtime
}

func criImage(img image.Image) *runtimeapi.Image {
	ref := img.ID
	if len(img.Names) > 0 {
		ref = img.Names[0]
	}
	return &runtimeapi.Image{
		Id:       img.ID,
		RepoTags: img.Names,
		Size:     img.Size,
		Spec:     &runtimeapi.ImageSpec{Image: ref},
	}
}

// ListImages implements the CRI call; the filter matches a name or ID.
func (s *imageServer) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		img, err := s.r.images.Resolve(ref)
		if errors.Is(err, image.ErrNotFound) {
			return &runtimeapi.ListImagesResponse{}, nil
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{criImage(img)}}, nil
	}
	imgs, err := s.r.images.List()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &runtimeapi.ListImagesResponse{}
	for _, img := range imgs {
		resp.Images = append(resp.Images, criImage(img))
	}
	return resp, nil
}

// ImageStatus implements the CRI call: an unknown image is a nil image, not
// an error, as in containerd.
func (s *imageServer) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	img, err := s.r.images.Resolve(req.GetImage().GetImage())
	if errors.Is(err, image.ErrNotFound) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &runtimeapi.ImageStatusResponse{Image: criImage(img)}
	if req.GetVerbose() {
		resp.Info = map[string]string{"path": img.Path}
	}
	return resp, nil
}

// PullImage implements the CRI call. A file reference (file:///abs/path or
// /abs/path: a .wasm module, an OCI image layout or an image tarball) is
// imported again on every pull, under the reference as its name. A name
// imported into the store (`wasmlet runtime import`) is served from it. Any
// other name is pulled from its registry with the request's credentials —
// the Wasm OCI artifact, or an image with a Wasm layer — over TLS (plain
// HTTP only to a registry on loopback) and stored under the name.
func (s *imageServer) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	r := s.r
	if _, ok := image.SourcePath(ref); ok {
		img, err := r.images.Import(ref, ref)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		r.log.Info("image imported", "image", ref, "id", img.ID)
		go r.modules.get(context.Background(), img, ref) // warm the compile; errors surface at CreateContainer
		return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
	}
	if r.images.Imported(ref) {
		img, err := r.images.Resolve(ref)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
	}
	named, err := pluginoci.ParseReference(ref)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "image %q: %v", ref, err)
	}
	client := r.registry.WithKeychain(authKeychain{req.GetAuth()})
	img, err := r.images.Pull(ref, named, client.RemoteOptions(ctx)...)
	if err != nil {
		return nil, pullError(err)
	}
	r.log.Info("image pulled", "image", ref, "id", img.ID)
	go r.modules.get(context.Background(), img, ref)
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

// pullError is a failed registry pull as a gRPC status: Unauthenticated
// for the registry's 401 or 403, with its message; a hint at the CA flags
// for a certificate of an unknown authority.
func pullError(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return status.Errorf(codes.Unknown, "%v (the registry's CA is not trusted: wasmlet runtime --registry-ca, wasmlet run --image-registry-ca)", err)
	}
	return status.Error(codes.Unknown, err.Error())
}

// authKeychain presents a CRI pull request's credentials to every
// registry (the agent chose them for the image's); none is anonymous.
type authKeychain struct{ auth *runtimeapi.AuthConfig }

// Resolve implements authn.Keychain.
func (k authKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	a := k.auth
	if a == nil || (a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == "" && a.RegistryToken == "") {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username: a.Username, Password: a.Password, Auth: a.Auth,
		IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken,
	}), nil
}

// RemoveImage implements the CRI call: the image goes with all its names.
// Removing an unknown image is not an error.
func (s *imageServer) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	img, err := s.r.images.Resolve(ref)
	if errors.Is(err, image.ErrNotFound) {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if err == nil {
		err = s.r.images.Remove(img.ID)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.r.modules.forget(img.ID)
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo implements the CRI call: the image store's usage, and the
// containers' scratch roots as the container filesystem.
func (s *imageServer) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	now := time.Now().UnixNano()
	imgBytes, imgInodes, err := s.r.images.Usage()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	ctrDir := s.r.cfg.RootDir + "/containers"
	ctrBytes, ctrInodes, err := image.DirUsage(ctrDir)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.r.images.Dir()},
			UsedBytes:  &runtimeapi.UInt64Value{Value: imgBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: imgInodes},
		}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ctrDir},
			UsedBytes:  &runtimeapi.UInt64Value{Value: ctrBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: ctrInodes},
		}},
	}, nil
}
