package fasthttp

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/bytebufferpool"

	brotli "github.com/molecule-man/go-brrr"
)

// ServeFileBytesUncompressed returns HTTP response containing file contents
// from the given path.
//
// Directory contents is returned if path points to directory.
//
// ServeFileBytes may be used for saving network traffic when serving files
// with good compression ratio.
//
// See also RequestCtx.SendFileBytes.
//
// WARNING: do not pass any user supplied paths to this function!
// WARNING: if path is based on user input users will be able to request
// any file on your filesystem! Use fasthttp.FS with a sane Root instead.
func ServeFileBytesUncompressed(ctx *RequestCtx, path []byte) {
	ServeFileUncompressed(ctx, b2s(path))
}

// ServeFileUncompressed returns HTTP response containing file contents
// from the given path.
//
// Directory contents is returned if path points to directory.
//
// ServeFile may be used for saving network traffic when serving files
// with good compression ratio.
//
// See also RequestCtx.SendFile.
//
// WARNING: do not pass any user supplied paths to this function!
// WARNING: if path is based on user input users will be able to request
// any file on your filesystem! Use fasthttp.FS with a sane Root instead.
func ServeFileUncompressed(ctx *RequestCtx, path string) {
	ctx.Request.Header.DelBytes(strAcceptEncoding)
	ServeFile(ctx, path)
}

// ServeFileBytes returns HTTP response containing compressed file contents
// from the given path.
//
// HTTP response may contain uncompressed file contents in the following cases:
//
//   - Missing 'Accept-Encoding: gzip' request header.
//   - No write access to directory containing the file.
//
// Directory contents is returned if path points to directory.
//
// Use ServeFileBytesUncompressed is you don't need serving compressed
// file contents.
//
// See also RequestCtx.SendFileBytes, ServeFileLiteral.
//
// WARNING: do not pass any user supplied paths to this function!
// WARNING: if path is based on user input users will be able to request
// any file on your filesystem! Use fasthttp.FS with a sane Root instead.
func ServeFileBytes(ctx *RequestCtx, path []byte) {
	ServeFile(ctx, b2s(path))
}

// ServeFile returns HTTP response containing compressed file contents
// from the given path.
//
// HTTP response may contain uncompressed file contents in the following cases:
//
//   - Missing 'Accept-Encoding: gzip' request header.
//   - No write access to directory containing the file.
//
// Directory contents is returned if path points to directory.
//
// Use ServeFileUncompressed is you don't need serving compressed file contents.
//
// ServeFile interprets path as a URI path internally. Percent-encoded
// sequences may be decoded, and '?' or '#' may be treated as URI delimiters.
// Use ServeFileLiteral if you need literal path semantics.
//
// See also RequestCtx.SendFile, ServeFileLiteral.
//
// WARNING: do not pass any user supplied paths to this function!
// WARNING: if path is based on user input users will be able to request
// any file on your filesystem! Use fasthttp.FS with a sane Root instead.
func ServeFile(ctx *RequestCtx, path string) {
	rootFSOnce.Do(func() {
		rootFSHandler = rootFS.NewRequestHandler()
	})

	path, ok := normalizeServeFilePath(ctx, path)
	if !ok {
		return
	}
	ctx.Request.SetRequestURI(path)
	rootFSHandler(ctx)
}

// ServeFileLiteral returns HTTP response containing compressed file contents
// from the given path using literal path semantics.
//
// Reserved URI characters in path such as '%', '?' and '#' are preserved
// instead of being interpreted during internal request URI processing.
//
// HTTP response may contain uncompressed file contents in the following cases:
//
//   - Missing 'Accept-Encoding: gzip' request header.
//   - No write access to directory containing the file.
//
// Directory contents is returned if path points to directory.
//
// Use ServeFileUncompressed if you don't need serving compressed file contents.
//
// See also RequestCtx.SendFileLiteral, ServeFile.
//
// WARNING: do not pass any user supplied paths to this function!
// WARNING: if path is based on user input users will be able to request
// any file on your filesystem! Use fasthttp.FS with a sane Root instead.
func ServeFileLiteral(ctx *RequestCtx, path string) {
	rootFSOnce.Do(func() {
		rootFSHandler = rootFS.NewRequestHandler()
	})

	path, ok := normalizeServeFilePath(ctx, path)
	if !ok {
		return
	}
	ctx.Request.SetRequestURIBytes(appendQuotedPath(nil, s2b(path)))
	rootFSHandler(ctx)
}

var (
	rootFSOnce sync.Once
	rootFS     = &FS{
		PathRewrite:        serveFilePathRewrite,
		Root:               "",
		AllowEmptyRoot:     true,
		GenerateIndexPages: true,
		Compress:           true,
		CompressBrotli:     true,
		CompressZstd:       true,
		AcceptByteRange:    true,
	}
	rootFSHandler RequestHandler
)

// ServeFS returns HTTP response containing compressed file contents from the given fs.FS's path.
//
// HTTP response may contain uncompressed file contents in the following cases:
//
//   - Missing 'Accept-Encoding: gzip' request header.
//   - No write access to directory containing the file.
//
// Directory contents is returned if path points to directory.
//
// ServeFS interprets path as a URI path internally. Percent-encoded
// sequences may be decoded, and '?' or '#' may be treated as URI delimiters.
// Use ServeFSLiteral if you need literal path semantics.
//
// See also ServeFile, ServeFSLiteral.
func ServeFS(ctx *RequestCtx, filesystem fs.FS, path string) {
	serveFS(ctx, filesystem, path, false)
}

// ServeFSLiteral returns HTTP response containing compressed file contents
// from the given fs.FS's path using literal path semantics.
//
// Reserved URI characters in path such as '%', '?' and '#' are preserved
// instead of being interpreted during internal request URI processing.
//
// HTTP response may contain uncompressed file contents in the following cases:
//
//   - Missing 'Accept-Encoding: gzip' request header.
//   - No write access to directory containing the file.
//
// Directory contents is returned if path points to directory.
//
// See also ServeFS, ServeFileLiteral.
func ServeFSLiteral(ctx *RequestCtx, filesystem fs.FS, path string) {
	serveFS(ctx, filesystem, path, true)
}

func serveFS(ctx *RequestCtx, filesystem fs.FS, path string, literal bool) {
	f := &FS{
		FS:                 filesystem,
		Root:               "",
		AllowEmptyRoot:     true,
		GenerateIndexPages: true,
		Compress:           true,
		CompressBrotli:     true,
		CompressZstd:       true,
		AcceptByteRange:    true,
		// This FS serves exactly one request, so its cache can never be hit
		// again. Skipping it drops a cleaner goroutine per call and releases the
		// file when the response body closes instead of at GC time.
		SkipCache: true,
	}
	handler := f.NewRequestHandler()

	if literal {
		ctx.Request.SetRequestURIBytes(appendQuotedPath(nil, s2b(path)))
	} else {
		ctx.Request.SetRequestURI(path)
	}
	handler(ctx)
}

func normalizeServeFilePath(ctx *RequestCtx, path string) (string, bool) {
	if path == "" || !filepath.IsAbs(path) {
		// extend relative path to absolute path
		hasTrailingSlash := path != "" && (path[len(path)-1] == '/' || path[len(path)-1] == '\\')

		var err error
		path = filepath.FromSlash(path)
		if path, err = filepath.Abs(path); err != nil {
			ctx.Logger().Printf("cannot resolve path %q to absolute file path: %v", path, err)
			ctx.Error("Internal Server Error", StatusInternalServerError)
			return "", false
		}
		if hasTrailingSlash {
			path += "/"
		}
	}

	// convert the path to forward slashes regardless the OS in order to set the URI properly
	// the handler will convert back to OS path separator before opening the file
	return filepath.ToSlash(path), true
}

// PathRewriteFunc must return new request path based on arbitrary ctx
// info such as ctx.Path().
//
// Path rewriter is used in FS for translating the current request
// to the local filesystem path relative to FS.Root.
//
// The returned path must not contain '..' path segments due to security reasons,
// since such paths may refer files outside FS.Root.
//
// The returned path may refer to ctx members. For example, ctx.Path().
type PathRewriteFunc func(ctx *RequestCtx) []byte

// NewVHostPathRewriter returns path rewriter, which strips slashesCount
// leading slashes from the path and prepends the path with request's host,
// thus simplifying virtual hosting for static files.
//
// Examples:
//
//   - host=foobar.com, slashesCount=0, original path="/foo/bar".
//     Resulting path: "/foobar.com/foo/bar"
//
//   - host=img.aaa.com, slashesCount=1, original path="/images/123/456.jpg"
//     Resulting path: "/img.aaa.com/123/456.jpg"
func NewVHostPathRewriter(slashesCount int) PathRewriteFunc {
	return func(ctx *RequestCtx) []byte {
		path := stripLeadingSlashes(ctx.Path(), slashesCount)
		// On Windows ctx.Path() may keep a '..' segment, e.g. from `/a/..\../`.
		// Return it unchanged so FS rejects it instead of letting the second
		// normalization below remove the host segment.
		if hasDotDotPathSegment(path) {
			return path
		}
		host := ctx.Host()
		if n := bytes.IndexAny(host, `/\`); n >= 0 {
			host = nil
		}
		if len(host) == 0 || len(bytes.Trim(host, ".")) == 0 {
			host = strInvalidHost
		}
		b := bytebufferpool.Get()
		b.B = append(b.B, '/')
		b.B = appendQuotedPath(b.B, host)
		b.B = appendQuotedPath(b.B, path)
		ctx.URI().SetPathBytes(b.B)
		bytebufferpool.Put(b)

		return ctx.Path()
	}
}

var strInvalidHost = []byte("invalid-host")

// NewPathSlashesStripper returns path rewriter, which strips slashesCount
// leading slashes from the path.
//
// Examples:
//
//   - slashesCount = 0, original path: "/foo/bar", result: "/foo/bar"
//   - slashesCount = 1, original path: "/foo/bar", result: "/bar"
//   - slashesCount = 2, original path: "/foo/bar", result: ""
//
// The returned path rewriter may be used as FS.PathRewrite .
func NewPathSlashesStripper(slashesCount int) PathRewriteFunc {
	return func(ctx *RequestCtx) []byte {
		return stripLeadingSlashes(ctx.Path(), slashesCount)
	}
}

// NewPathPrefixStripper returns path rewriter, which removes prefixSize bytes
// from the path prefix.
//
// Examples:
//
//   - prefixSize = 0, original path: "/foo/bar", result: "/foo/bar"
//   - prefixSize = 3, original path: "/foo/bar", result: "o/bar"
//   - prefixSize = 7, original path: "/foo/bar", result: "r"
//
// The returned path rewriter may be used as FS.PathRewrite .
func NewPathPrefixStripper(prefixSize int) PathRewriteFunc {
	return func(ctx *RequestCtx) []byte {
		path := ctx.Path()
		if len(path) >= prefixSize {
			path = path[prefixSize:]
		}
		return path
	}
}

// FS represents settings for request handler serving static files
// from the local filesystem.
//
// It is prohibited copying FS values. Create new values instead.
type FS struct {
	noCopy noCopy

	// FS is filesystem to serve files from. eg: embed.FS os.DirFS
	FS fs.FS

	// Path rewriting function.
	//
	// By default request path is not modified.
	PathRewrite PathRewriteFunc

	// PathNotFound fires when file is not found in filesystem
	// this functions tries to replace "Cannot open requested path"
	// server response giving to the programmer the control of server flow.
	//
	// By default PathNotFound returns
	// "Cannot open requested path"
	PathNotFound RequestHandler

	// Suffixes list to add to compressedFileSuffix depending on encoding
	//
	// This value has sense only if Compress is set.
	//
	// FSCompressedFileSuffixes is used by default.
	CompressedFileSuffixes map[string]string

	// If CleanStop is set, the channel can be closed to stop the cleanup handlers
	// for the FS RequestHandlers created with NewRequestHandler.
	// NEVER close this channel while the handler is still being used!
	CleanStop chan struct{}

	h RequestHandler

	// Path to the root directory to serve files from.
	//
	// Symbolic links under Root are only followed while they stay inside
	// it, see AllowSymlinksOutsideRoot.
	// If Root is a file, its compressed copies are confined to its parent directory.
	Root string

	// Path to the compressed root directory to serve files from. If this value
	// is empty, Root is used.
	//
	// When a separate directory is used, FS writes compressed copies under
	// .fasthttp-<SHA-256 of the normalized Root path>, so distinct root paths can
	// share a cache. Copies in the previous flat layout are regenerated on
	// demand. Give older handlers a separate CompressRoot for each Root
	// and remove their flat caches once those handlers stop using them.
	// Keep a shared cache outside publicly served roots.
	//
	// Compressed copies are confined to CompressRoot (or its parent directory
	// if it is a file) unless it is a whole volume or AllowSymlinksOutsideRoot is set.
	CompressRoot string

	// Suffix to add to the name of cached compressed file.
	//
	// This value has sense only if Compress is set.
	//
	// FSCompressedFileSuffix is used by default.
	CompressedFileSuffix string

	// List of index file names to try opening during directory access.
	//
	// For example:
	//
	//     * index.html
	//     * index.htm
	//     * my-super-index.xml
	//
	// By default the list is empty.
	IndexNames []string

	// Expiration duration for inactive file handlers.
	//
	// Up to 4096 files of up to 8 KiB each are cached in memory rather than
	// as open file handles, so changes to them are served only after their
	// cache entries expire.
	//
	// FSHandlerCacheDuration is used by default.
	CacheDuration time.Duration

	once sync.Once

	// AllowEmptyRoot controls what happens when Root is empty. When false (default) it will default to the
	// current working directory. An empty root is mostly useful when you want to use absolute paths
	// on windows that are on different filesystems. On linux setting your Root to "/" already allows you to use
	// absolute paths on any filesystem.
	AllowEmptyRoot bool

	// AllowSymlinksOutsideRoot makes FS follow symbolic links that lead
	// outside Root, or outside CompressRoot for the compressed copies.
	//
	// By default, when FS serves files from the OS filesystem (FS.FS is nil),
	// every file FS opens, stats or writes for a request is resolved with
	// os.Root, so it stays inside its root directory even if a path component
	// is a symbolic link. Requested files, index files and directory listings
	// are resolved in Root, and the compressed copies FS writes are resolved
	// in CompressRoot. Symbolic links that point outside the root, and
	// absolute symbolic links, are then not followed: requests for paths
	// through them are answered as if the path could not be opened (404,
	// or 403 for an index file). Generated index pages still list such
	// links. Symbolic links that stay inside the root keep working, and
	// Root and CompressRoot themselves may be symbolic links. A Root or
	// CompressRoot that is empty or a whole volume, such as "/", has no
	// directory to confine paths to, so paths in it are used as they are;
	// the other one is still confined.
	//
	// Set this only if Root deliberately links to files elsewhere. Paths are
	// then joined with Root and opened as they are.
	AllowSymlinksOutsideRoot bool

	// Uses brotli encoding and fallbacks to zstd or gzip in responses if set to true, uses zstd or gzip if set to false.
	//
	// This value has sense only if Compress is set.
	//
	// Brotli encoding is disabled by default.
	CompressBrotli bool

	// Uses zstd encoding and fallbacks to gzip in responses if set to true, uses gzip if set to false.
	//
	// This value has sense only if Compress is set.
	//
	// zstd encoding is disabled by default.
	CompressZstd bool

	// Index pages for directories without files matching IndexNames
	// are automatically generated if set.
	//
	// Directory index generation may be quite slow for directories
	// with many files (more than 1K), so it is discouraged enabling
	// index pages' generation for such directories.
	//
	// By default index pages aren't generated.
	GenerateIndexPages bool

	// Transparently compresses responses if set to true.
	//
	// The server tries minimizing CPU usage by caching compressed files.
	// It adds CompressedFileSuffix suffix to the original file name and
	// tries saving the resulting compressed file under the new file name.
	// So it is advisable to give the server write access to Root
	// and to all inner folders in order to minimize CPU usage when serving
	// compressed responses.
	//
	// Transparent compression is disabled by default.
	Compress bool

	// Enables byte range requests if set to true.
	//
	// Byte range requests are disabled by default.
	AcceptByteRange bool

	// Sends a weak ETag header derived from the modification time and size
	// of the served file if set to true. GET and HEAD requests with a matching
	// If-None-Match header get '304 Not Modified' responses, other methods
	// get '412 Precondition Failed'.
	//
	// Files with an unknown modification time, such as files from embed.FS,
	// get no ETag, since a size-only tag cannot reliably detect changes.
	//
	// ETag generation is disabled by default.
	GenerateETag bool

	// SkipCache if true, will cache no file handler.
	//
	// By default is false.
	SkipCache bool
}

// FSCompressedFileSuffix is the suffix FS adds to the original file names
// when trying to store compressed file under the new file name.
// See FS.Compress for details.
const FSCompressedFileSuffix = ".fasthttp.gz"

// FSCompressedFileSuffixes is the suffixes FS adds to the original file names depending on encoding
// when trying to store compressed file under the new file name.
// See FS.Compress for details.
//
// This map is read during FSHandler initialization (which runs in a sync.Once).
// It is not safe for concurrent modification. Set any custom suffixes in an
// init() function or before the first call to FS.NewRequestHandler, and do not
// modify the map afterwards.
var FSCompressedFileSuffixes = map[string]string{
	"gzip": ".fasthttp.gz",
	"br":   ".fasthttp.br",
	"zstd": ".fasthttp.zst",
}

// FSHandlerCacheDuration is the default expiration duration for inactive
// file handlers opened by FS.
const FSHandlerCacheDuration = 10 * time.Second

// FSHandler returns request handler serving static files from
// the given root folder.
//
// stripSlashes indicates how many leading slashes must be stripped
// from requested path before searching requested file in the root folder.
// Examples:
//
//   - stripSlashes = 0, original path: "/foo/bar", result: "/foo/bar"
//   - stripSlashes = 1, original path: "/foo/bar", result: "/bar"
//   - stripSlashes = 2, original path: "/foo/bar", result: ""
//
// The returned request handler automatically generates index pages
// for directories without index.html.
//
// The returned handler caches requested file handles
// for FSHandlerCacheDuration.
// Make sure your program has enough 'max open files' limit aka
// 'ulimit -n' if root folder contains many files.
//
// Do not create multiple request handler instances for the same
// (root, stripSlashes) arguments - just reuse a single instance.
// Otherwise goroutine leak will occur.
func FSHandler(root string, stripSlashes int) RequestHandler {
	fs := &FS{
		Root:               root,
		IndexNames:         []string{"index.html"},
		GenerateIndexPages: true,
		AcceptByteRange:    true,
	}
	if stripSlashes > 0 {
		fs.PathRewrite = NewPathSlashesStripper(stripSlashes)
	}
	return fs.NewRequestHandler()
}

// NewRequestHandler returns new request handler with the given FS settings.
//
// The returned handler caches requested file handles
// for FS.CacheDuration.
// Make sure your program has enough 'max open files' limit aka
// 'ulimit -n' if FS.Root folder contains many files.
//
// Do not create multiple request handlers from a single FS instance -
// just reuse a single request handler.
func (fs *FS) NewRequestHandler() RequestHandler {
	fs.once.Do(fs.initRequestHandler)
	return fs.h
}

func (fs *FS) normalizeRoot(root string) string {
	// fs.FS uses relative paths, that paths are slash-separated on all systems, even Windows.
	if fs.FS == nil {
		// Serve files from the current working directory if Root is empty or if Root is a relative path.
		if (!fs.AllowEmptyRoot && root == "") || (root != "" && !filepath.IsAbs(root)) {
			path, err := os.Getwd()
			if err != nil {
				path = "."
			}
			root = path + "/" + root
		}

		// convert the root directory slashes to the native format
		root = filepath.FromSlash(root)
	} else {
		if root == "" {
			return root
		}

		// Normalize fs.FS roots to slash-separated relative paths.
		root = strings.ReplaceAll(root, "\\", "/")
		root = strings.TrimLeft(root, "/")
		if root == "" {
			return root
		}
		root = path.Clean(root)
		if root == "." {
			return "."
		}
		return root
	}

	// strip trailing slashes from the root path
	for root != "" && root[len(root)-1] == os.PathSeparator {
		root = root[:len(root)-1]
	}
	return root
}

func (fs *FS) initRequestHandler() {
	root := fs.normalizeRoot(fs.Root)

	compressRoot := fs.CompressRoot
	if compressRoot == "" {
		compressRoot = root
	} else {
		compressRoot = fs.normalizeRoot(compressRoot)
	}

	compressedFileSuffixes := fs.CompressedFileSuffixes
	if compressedFileSuffixes["br"] == "" || compressedFileSuffixes["gzip"] == "" ||
		compressedFileSuffixes["zstd"] == "" || compressedFileSuffixes["br"] == compressedFileSuffixes["gzip"] ||
		compressedFileSuffixes["br"] == compressedFileSuffixes["zstd"] ||
		compressedFileSuffixes["gzip"] == compressedFileSuffixes["zstd"] {
		// Copy global map
		compressedFileSuffixes = make(map[string]string, len(FSCompressedFileSuffixes))
		maps.Copy(compressedFileSuffixes, FSCompressedFileSuffixes)
	}

	if fs.CompressedFileSuffix != "" {
		compressedFileSuffixes["gzip"] = fs.CompressedFileSuffix
		compressedFileSuffixes["br"] = FSCompressedFileSuffixes["br"]
		compressedFileSuffixes["zstd"] = FSCompressedFileSuffixes["zstd"]
	}

	h := &fsHandler{
		filesystem:             fs.FS,
		root:                   root,
		indexNames:             fs.IndexNames,
		pathRewrite:            fs.PathRewrite,
		generateIndexPages:     fs.GenerateIndexPages,
		compress:               fs.Compress,
		compressBrotli:         fs.CompressBrotli,
		compressZstd:           fs.CompressZstd,
		compressRoot:           compressRoot,
		pathNotFound:           fs.PathNotFound,
		acceptByteRange:        fs.AcceptByteRange,
		generateETag:           fs.GenerateETag,
		skipCache:              fs.SkipCache,
		compressedFileSuffixes: compressedFileSuffixes,
	}

	h.cacheManager = newCacheManager(fs)

	if h.filesystem == nil {
		h.filesystem = newOSFS(root, compressRoot, fs.AllowSymlinksOutsideRoot)
		if fs.Compress && root != compressRoot {
			// A single-file CompressRoot keeps its cache in its parent.
			cacheDir := compressRoot
			if fi, err := os.Stat(compressRoot); err == nil && !fi.IsDir() {
				cacheDir = strings.TrimSuffix(compressRoot, filepath.Base(compressRoot))
			}
			h.compressRoot = compressedCacheDir(root, cacheDir)
		}
	}

	if fs.SkipCache {
		// noopCacheManager.Close is a no-op, so there is nothing to stop.
		fs.h = h.handleRequest
		return
	}

	// Use a >16-byte backing array so the cleanup owner doesn't fall under
	// runtime's tiny pointer-free allocation batching.
	cacheCleaner := make([]byte, 32)
	runtime.AddCleanup(&cacheCleaner[0], cacheManager.Close, h.cacheManager)
	fs.h = func(ctx *RequestCtx) {
		h.handleRequest(ctx)
		// Keep the cleanup owner captured by fs.h and alive until
		// h.handleRequest returns, since its cleanup stops the cache cleaner.
		runtime.KeepAlive(cacheCleaner)
	}
}

type fsHandler struct {
	smallFileReaderPool sync.Pool
	filesystem          fs.FS

	cacheManager cacheManager

	// smallFilesInMemory counts the cached files held in memory, which
	// maxSmallFilesInMemory bounds.
	smallFilesInMemory atomic.Int64

	pathRewrite            PathRewriteFunc
	pathNotFound           RequestHandler
	compressedFileSuffixes map[string]string

	root               string
	compressRoot       string
	indexNames         []string
	generateIndexPages bool
	compress           bool
	compressBrotli     bool
	compressZstd       bool
	acceptByteRange    bool
	generateETag       bool
	skipCache          bool
}

type fsFile struct {
	lastModified time.Time

	t               time.Time
	f               fs.File
	h               *fsHandler
	filename        string // fs.FileInfo.Name() return filename, isn't filepath.
	contentType     string
	dirIndex        []byte // contents of a file served from memory, f is nil then
	lastModifiedStr []byte
	etag            []byte

	bigFiles      []*bigFileReader
	contentLength int
	readersCount  int

	bigFilesLock sync.Mutex
	compressed   bool

	// inCompressRoot is set for a compressed copy FS wrote to CompressRoot,
	// which bigFileReader opens again in CompressRoot rather than in Root.
	inCompressRoot bool

	// countedInMemory is set while the file counts toward its handler's
	// smallFilesInMemory.
	countedInMemory bool
}

func (ff *fsFile) NewReader() (io.Reader, error) {
	if ff.isBig() {
		return ff.bigFileReader()
	}
	return ff.smallFileReader(), nil
}

func (ff *fsFile) smallFileReader() io.Reader {
	v := ff.h.smallFileReaderPool.Get()
	if v == nil {
		v = &fsSmallFileReader{}
	}
	r := v.(*fsSmallFileReader) //nolint:forcetypeassert
	r.ff = ff
	r.endPos = ff.contentLength
	if r.startPos > 0 {
		panic("bug: fsSmallFileReader with non-nil startPos found in the pool")
	}
	return r
}

// Files bigger than this size are sent with sendfile.
const maxSmallFileSize = 2 * 4096

// maxSmallFilesInMemory bounds how many small files one FS keeps in memory,
// and with that the file contents it holds to 32 MiB. Past it, small files
// are cached as open files and read on every request, so paths an attacker
// can vary, such as letter case on a case-insensitive filesystem, can't make
// it hold file contents without limit.
const maxSmallFilesInMemory = 4096

func (ff *fsFile) isBig() bool {
	if _, ok := ff.h.filesystem.(*osFS); !ok { // fs.FS only uses bigFileReader, memory cache uses fsSmallFileReader
		return ff.f != nil
	}
	return ff.contentLength > maxSmallFileSize && len(ff.dirIndex) == 0
}

func (ff *fsFile) bigFileReader() (io.Reader, error) {
	if ff.f == nil {
		return nil, errors.New("bug: ff.f must be non-nil in big file reader")
	}

	var r *bigFileReader

	ff.bigFilesLock.Lock()
	n := len(ff.bigFiles)
	if n > 0 {
		r = ff.bigFiles[n-1]
		ff.bigFiles = ff.bigFiles[:n-1]
	}
	ff.bigFilesLock.Unlock()

	if r == nil {
		f, err := ff.reopen()
		if err != nil {
			return nil, fmt.Errorf("cannot open already opened file: %w", err)
		}
		r = &bigFileReader{
			f:  f,
			ff: ff,
		}
	}

	// The file may have grown since its size was cached. Stop at the cached
	// size, so nothing follows the body the Content-Length announces. A file
	// with a negative size is streamed until EOF.
	r.r = r.f
	if ff.contentLength >= 0 {
		r.lr.R = r.f
		r.lr.N = int64(ff.contentLength)
		r.r = &r.lr
	}
	return r, nil
}

// reopen opens the file ff serves once more, in the root it was opened in.
func (ff *fsFile) reopen() (fs.File, error) {
	if o, ok := ff.h.filesystem.(*osFS); ok && ff.inCompressRoot {
		f, err := o.compressRoot.open(ff.filename)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return ff.h.filesystem.Open(ff.filename)
}

func (ff *fsFile) Release() {
	if ff.countedInMemory {
		ff.countedInMemory = false
		ff.h.smallFilesInMemory.Add(-1)
	}
	if ff.f != nil {
		_ = ff.f.Close()

		if ff.isBig() {
			ff.bigFilesLock.Lock()
			for _, r := range ff.bigFiles {
				_ = r.f.Close()
			}
			ff.bigFilesLock.Unlock()
		}
	}
}

func (ff *fsFile) decReadersCount() {
	ff.h.cacheManager.DecReadersCount(ff)
}

// bigFileReader attempts to trigger sendfile
// for sending big files over the wire.
type bigFileReader struct {
	f  fs.File
	ff *fsFile
	r  io.Reader
	lr io.LimitedReader
}

func (r *bigFileReader) UpdateByteRange(startPos, endPos int) error {
	seeker, ok := r.f.(io.Seeker)
	if !ok {
		return errors.New("must implement seek")
	}
	if _, err := seeker.Seek(int64(startPos), io.SeekStart); err != nil {
		return err
	}
	r.r = &r.lr
	r.lr.R = r.f
	r.lr.N = int64(endPos - startPos + 1)
	return nil
}

func (r *bigFileReader) Read(p []byte) (int, error) {
	return r.r.Read(p)
}

func (r *bigFileReader) WriteTo(w io.Writer) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		// fast path. Send file must be triggered
		return rf.ReadFrom(r.r)
	}

	// slow path
	return copyZeroAlloc(w, r.r)
}

func (r *bigFileReader) Close() error {
	r.r = r.f
	seeker, ok := r.f.(io.Seeker)
	if !ok {
		_ = r.f.Close()
		return errors.New("must implement seek")
	}
	n, err := seeker.Seek(0, io.SeekStart)
	if err == nil {
		if n == 0 {
			ff := r.ff
			ff.bigFilesLock.Lock()
			ff.bigFiles = append(ff.bigFiles, r)
			ff.bigFilesLock.Unlock()
		} else {
			_ = r.f.Close()
			err = errors.New("bug: seek to start returned (non-zero, nil)")
		}
	} else {
		_ = r.f.Close()
	}
	r.ff.decReadersCount()
	return err
}

type fsSmallFileReader struct {
	ff       *fsFile
	startPos int
	endPos   int
}

func (r *fsSmallFileReader) Close() error {
	ff := r.ff
	ff.decReadersCount()
	r.ff = nil
	r.startPos = 0
	r.endPos = 0
	ff.h.smallFileReaderPool.Put(r)
	return nil
}

func (r *fsSmallFileReader) UpdateByteRange(startPos, endPos int) error {
	r.startPos = startPos
	r.endPos = endPos + 1
	return nil
}

func (r *fsSmallFileReader) Read(p []byte) (int, error) {
	tailLen := r.endPos - r.startPos
	if tailLen <= 0 {
		return 0, io.EOF
	}
	if len(p) > tailLen {
		p = p[:tailLen]
	}

	ff := r.ff
	if ff.f != nil {
		ra, ok := ff.f.(io.ReaderAt)
		if !ok {
			return 0, errors.New("must implement readat")
		}
		n, err := ra.ReadAt(p, int64(r.startPos))
		r.startPos += n
		return n, err
	}

	n := copy(p, ff.dirIndex[r.startPos:])
	r.startPos += n
	return n, nil
}

func (r *fsSmallFileReader) WriteTo(w io.Writer) (int64, error) {
	ff := r.ff

	var n int
	var err error
	if ff.f == nil {
		b := ff.dirIndex[r.startPos:r.endPos]
		n, err = w.Write(b)
		r.startPos += n
		if err == nil && n != len(b) {
			err = io.ErrShortWrite
		}
		return int64(n), err
	}

	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}

	curPos := r.startPos
	bufv := copyBufPool.Get()
	buf := bufv.([]byte) //nolint:forcetypeassert
	for err == nil {
		tailLen := r.endPos - curPos
		if tailLen <= 0 {
			break
		}
		if len(buf) > tailLen {
			buf = buf[:tailLen]
		}
		ra, ok := ff.f.(io.ReaderAt)
		if !ok {
			return 0, errors.New("must implement readat")
		}
		n, readErr := ra.ReadAt(buf, int64(curPos))
		nw, errw := w.Write(buf[:n])
		curPos += nw
		if errw == nil && nw != n {
			errw = io.ErrShortWrite
		}
		// The destination writer's error takes precedence, including an
		// io.EOF from a pipe writer after a partial copy. It must never be
		// cleared by the source EOF handling below.
		if errw != nil {
			err = errw
			break
		}
		// ReadAt may return data together with io.EOF when the file shrank
		// after its size was cached. That EOF only marks the end of the source:
		// stop here, otherwise curPos stays below endPos and the loop keeps
		// issuing empty writes.
		if readErr == io.EOF {
			break
		}
		err = readErr
	}
	copyBufPool.Put(bufv)

	written := curPos - r.startPos
	r.startPos = curPos
	return int64(written), err
}

type cacheManager interface {
	Lock()
	Unlock()
	Close()
	DecReadersCount(ff *fsFile)
	GetFileFromCache(cacheKind CacheKind, path []byte) (*fsFile, bool)
	SetFileToCache(cacheKind CacheKind, path []byte, ff *fsFile) *fsFile
}

var (
	_ cacheManager = (*inMemoryCacheManager)(nil)
	_ cacheManager = (*noopCacheManager)(nil)
)

type CacheKind uint8

const (
	defaultCacheKind CacheKind = iota
	brotliCacheKind
	gzipCacheKind
	zstdCacheKind
)

func newCacheManager(fs *FS) cacheManager {
	if fs.SkipCache {
		return &noopCacheManager{}
	}

	cacheDuration := fs.CacheDuration
	if cacheDuration <= 0 {
		cacheDuration = FSHandlerCacheDuration
	}

	instance := &inMemoryCacheManager{
		cacheDuration: cacheDuration,
		cache:         make(map[string]*fsFile),
		cacheBrotli:   make(map[string]*fsFile),
		cacheGzip:     make(map[string]*fsFile),
		cacheZstd:     make(map[string]*fsFile),
		cleanStop:     make(chan struct{}),
	}

	go instance.handleCleanCache(fs.CleanStop)

	return instance
}

type noopCacheManager struct {
	cacheLock sync.Mutex
}

func (n *noopCacheManager) Lock() {
	n.cacheLock.Lock()
}

func (n *noopCacheManager) Unlock() {
	n.cacheLock.Unlock()
}

func (*noopCacheManager) Close() {}

func (n *noopCacheManager) DecReadersCount(ff *fsFile) {
	release := false

	n.cacheLock.Lock()
	ff.readersCount--
	if ff.readersCount < 0 {
		n.cacheLock.Unlock()
		panic("bug: fsFile.readersCount < 0")
	}
	if ff.readersCount == 0 {
		release = true
	}
	n.cacheLock.Unlock()

	if release {
		ff.Release()
	}
}

func (*noopCacheManager) GetFileFromCache(cacheKind CacheKind, path []byte) (*fsFile, bool) {
	return nil, false
}

func (n *noopCacheManager) SetFileToCache(cacheKind CacheKind, path []byte, ff *fsFile) *fsFile {
	n.cacheLock.Lock()
	ff.readersCount++
	n.cacheLock.Unlock()
	return ff
}

type inMemoryCacheManager struct {
	cache         map[string]*fsFile
	cacheBrotli   map[string]*fsFile
	cacheGzip     map[string]*fsFile
	cacheZstd     map[string]*fsFile
	cacheDuration time.Duration
	cleanStop     chan struct{}
	cleanStopOnce sync.Once
	pendingFiles  []*fsFile
	closed        bool
	cacheLock     sync.Mutex
}

func (cm *inMemoryCacheManager) Lock() {
	cm.cacheLock.Lock()
}

func (cm *inMemoryCacheManager) Unlock() {
	cm.cacheLock.Unlock()
}

func (cm *inMemoryCacheManager) Close() {
	filesToRelease := cm.close()
	for _, ff := range filesToRelease {
		ff.Release()
	}
}

func (cm *inMemoryCacheManager) close() []*fsFile {
	closedNow := false
	cm.cleanStopOnce.Do(func() {
		close(cm.cleanStop)
		closedNow = true
	})
	if !closedNow {
		return nil
	}

	cm.cacheLock.Lock()
	cm.closed = true
	filesToRelease := cm.collectAllFilesToReleaseNolock(nil)
	cm.cacheLock.Unlock()

	return filesToRelease
}

func (cm *inMemoryCacheManager) DecReadersCount(ff *fsFile) {
	release := false

	cm.cacheLock.Lock()
	ff.readersCount--
	if ff.readersCount < 0 {
		cm.cacheLock.Unlock()
		panic("bug: fsFile.readersCount < 0")
	}
	if cm.closed && ff.readersCount == 0 {
		release = true
		cm.removePendingFileNolock(ff)
	}
	cm.cacheLock.Unlock()

	if release {
		ff.Release()
	}
}

func (cm *inMemoryCacheManager) getFsCache(cacheKind CacheKind) map[string]*fsFile {
	fileCache := cm.cache
	switch cacheKind {
	case brotliCacheKind:
		fileCache = cm.cacheBrotli
	case gzipCacheKind:
		fileCache = cm.cacheGzip
	case zstdCacheKind:
		fileCache = cm.cacheZstd
	}

	return fileCache
}

func (cm *inMemoryCacheManager) GetFileFromCache(cacheKind CacheKind, path []byte) (*fsFile, bool) {
	cm.cacheLock.Lock()
	var ff *fsFile
	var ok bool
	if !cm.closed {
		fileCache := cm.getFsCache(cacheKind)
		ff, ok = fileCache[string(path)]
	}
	if ok {
		ff.readersCount++
	}
	cm.cacheLock.Unlock()

	return ff, ok
}

func (cm *inMemoryCacheManager) SetFileToCache(cacheKind CacheKind, path []byte, ff *fsFile) *fsFile {
	cm.cacheLock.Lock()
	if cm.closed {
		ff.readersCount++
		cm.cacheLock.Unlock()
		return ff
	}

	fileCache := cm.getFsCache(cacheKind)
	ff1, ok := fileCache[string(path)]
	if !ok {
		fileCache[string(path)] = ff
		ff.readersCount++
	} else {
		ff1.readersCount++
	}
	cm.cacheLock.Unlock()

	if ok {
		// The file has been already opened by another
		// goroutine, so close the current file and use
		// the file opened by another goroutine instead.
		ff.Release()
		ff = ff1
	}

	return ff
}

func (cm *inMemoryCacheManager) handleCleanCache(cleanStop chan struct{}) {
	clean := func() {
		filesToRelease := cm.cleanCache()
		for _, ff := range filesToRelease {
			ff.Release()
		}
	}

	t := time.NewTicker(cm.cacheDuration / 2)
	defer t.Stop()

	for {
		select {
		case <-t.C:
			clean()
		case <-cm.cleanStop:
			return
		case _, stillOpen := <-cleanStop:
			// Ignore values send on the channel, only stop when it is closed.
			if !stillOpen {
				filesToRelease := cm.close()
				for _, ff := range filesToRelease {
					ff.Release()
				}
				return
			}
		}
	}
}

func (cm *inMemoryCacheManager) cleanCache() []*fsFile {
	var filesToRelease []*fsFile

	cm.cacheLock.Lock()
	if cm.closed {
		cm.cacheLock.Unlock()
		return nil
	}

	// Close files which couldn't be closed before due to non-zero
	// readers count on the previous run.
	var remainingFiles []*fsFile
	for _, ff := range cm.pendingFiles {
		if ff.readersCount > 0 {
			remainingFiles = append(remainingFiles, ff)
		} else {
			filesToRelease = append(filesToRelease, ff)
		}
	}
	cm.pendingFiles = remainingFiles

	filesToRelease = cm.cleanCacheNolock(cm.cache, filesToRelease)
	filesToRelease = cm.cleanCacheNolock(cm.cacheBrotli, filesToRelease)
	filesToRelease = cm.cleanCacheNolock(cm.cacheGzip, filesToRelease)
	filesToRelease = cm.cleanCacheNolock(cm.cacheZstd, filesToRelease)

	cm.cacheLock.Unlock()

	return filesToRelease
}

func (cm *inMemoryCacheManager) cleanCacheNolock(cache map[string]*fsFile, filesToRelease []*fsFile) []*fsFile {
	t := time.Now()
	for k, ff := range cache {
		if t.Sub(ff.t) > cm.cacheDuration {
			filesToRelease = cm.addFileToReleaseNolock(filesToRelease, ff)
			delete(cache, k)
		}
	}
	return filesToRelease
}

func (cm *inMemoryCacheManager) collectAllFilesToReleaseNolock(filesToRelease []*fsFile) []*fsFile {
	filesToRelease = cm.collectCacheFilesToReleaseNolock(cm.cache, filesToRelease)
	filesToRelease = cm.collectCacheFilesToReleaseNolock(cm.cacheBrotli, filesToRelease)
	filesToRelease = cm.collectCacheFilesToReleaseNolock(cm.cacheGzip, filesToRelease)
	filesToRelease = cm.collectCacheFilesToReleaseNolock(cm.cacheZstd, filesToRelease)

	pendingFiles := cm.pendingFiles
	cm.pendingFiles = nil
	for _, ff := range pendingFiles {
		filesToRelease = cm.addFileToReleaseNolock(filesToRelease, ff)
	}
	return filesToRelease
}

func (cm *inMemoryCacheManager) collectCacheFilesToReleaseNolock(cache map[string]*fsFile, filesToRelease []*fsFile) []*fsFile {
	for k, ff := range cache {
		filesToRelease = cm.addFileToReleaseNolock(filesToRelease, ff)
		delete(cache, k)
	}
	return filesToRelease
}

func (cm *inMemoryCacheManager) addFileToReleaseNolock(filesToRelease []*fsFile, ff *fsFile) []*fsFile {
	if ff.readersCount > 0 {
		// There are pending readers on the file handle, so we cannot close it.
		// Put it into pendingFiles so it will be closed later.
		cm.pendingFiles = append(cm.pendingFiles, ff)
		return filesToRelease
	}
	return append(filesToRelease, ff)
}

func (cm *inMemoryCacheManager) removePendingFileNolock(ff *fsFile) {
	for i, pendingFile := range cm.pendingFiles {
		if pendingFile == ff {
			copy(cm.pendingFiles[i:], cm.pendingFiles[i+1:])
			cm.pendingFiles[len(cm.pendingFiles)-1] = nil
			cm.pendingFiles = cm.pendingFiles[:len(cm.pendingFiles)-1]
			return
		}
	}
}

func (h *fsHandler) pathToFilePath(path []byte, hasTrailingSlash bool) string {
	if hasTrailingSlash {
		path = path[:len(path)-1]
	}
	hasLeadingSlash := len(path) > 0 && path[0] == '/'

	if _, ok := h.filesystem.(*osFS); !ok {
		root := h.root
		if root == "." {
			root = ""
		}
		if len(path) < 1 || (hasLeadingSlash && len(path) == 1) {
			if h.root == "." {
				return "."
			}
			return root
		}

		if root == "" {
			if hasLeadingSlash {
				return string(path[1:])
			}
			return string(path)
		}

		// Use byte buffer pool to avoid string concatenation allocations.
		b := bytebufferpool.Get()
		defer bytebufferpool.Put(b)

		b.B = append(b.B, root...)
		b.B = append(b.B, '/')
		if hasLeadingSlash {
			b.B = append(b.B, path[1:]...)
		} else {
			b.B = append(b.B, path...)
		}

		return string(b.B)
	}

	// Use byte buffer pool to avoid string concatenation allocations
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)

	b.B = append(b.B, h.root...)
	if hasLeadingSlash {
		b.B = append(b.B, path...)
	} else {
		if h.root != "" && len(path) > 0 {
			b.B = append(b.B, '/')
		}
		b.B = append(b.B, path...)
	}

	return filepath.FromSlash(string(b.B))
}

// Retain the configured path spelling for osRoot.rel, including a leading
// volume separator when the normalized compression root is empty.
func compressedCacheDir(root, compressRoot string) string {
	return fmt.Sprintf("%s%c.fasthttp-%x", compressRoot, os.PathSeparator, sha256.Sum256([]byte(root)))
}

func (h *fsHandler) filePathToCompressed(filePath string) string {
	if h.root == h.compressRoot {
		return filePath
	}
	relative, ok := strings.CutPrefix(filePath, h.root)
	if !ok {
		return filePath
	}
	if relative == "" {
		// The source root itself is a file.
		relative = "/" + filepath.Base(filePath)
	}
	return filepath.FromSlash(h.compressRoot + relative)
}

func (h *fsHandler) handleRequest(ctx *RequestCtx) {
	var path []byte
	if h.pathRewrite != nil {
		path = h.pathRewrite(ctx)
	} else {
		path = ctx.Path()
	}
	hasTrailingSlash := len(path) > 0 && path[len(path)-1] == '/'

	if n := bytes.IndexByte(path, 0); n >= 0 {
		ctx.Logger().Printf("cannot serve path with nil byte at position %d: %q", n, path)
		ctx.Error("Are you a hacker?", StatusBadRequest)
		return
	}
	// Prevent request paths from reaching NTFS alternate data streams through
	// the default osFS. Custom filesystems may define their own colon syntax.
	if _, ok := h.filesystem.(*osFS); ok && hasWindowsReservedPathColon(path, h.root == "") {
		ctx.Logger().Printf("cannot serve path with a Windows-reserved ':' character: %q", path)
		ctx.Error("Forbidden", StatusForbidden)
		return
	}

	// Rewritten paths bypass ctx.Path()'s normalization, so they must be
	// checked for '..' segments here. On Windows every path is checked
	// regardless: ctx.Path() normalization only treats '/' as a separator,
	// so backslash traversal such as `\..\` and `\../` survives it and
	// filepath.FromSlash later turns it into a real parent-directory jump
	// (https://github.com/valyala/fasthttp/issues/1691).
	if h.pathRewrite != nil || filepath.Separator == '\\' {
		if hasDotDotPathSegment(path) {
			ctx.Logger().Printf("cannot serve path with '..' path segment due to security reasons: %q", path)
			ctx.Error("Internal Server Error", StatusInternalServerError)
			return
		}
	}

	mustCompress := false
	fileCacheKind := defaultCacheKind
	fileEncoding := ""
	var byteRange []byte
	if ctx.IsGet() || ctx.IsHead() {
		// Range handling is only defined for GET, and HEAD gets the same
		// headers as GET. See https://www.rfc-editor.org/rfc/rfc9110#section-14.2
		byteRange = ctx.Request.Header.peek(strRange)
	}
	if len(byteRange) == 0 && h.compress {
		switch {
		case h.compressBrotli && ctx.Request.Header.HasAcceptEncodingBytes(strBr):
			mustCompress = true
			fileCacheKind = brotliCacheKind
			fileEncoding = "br"
		case h.compressZstd && ctx.Request.Header.HasAcceptEncodingBytes(strZstd):
			mustCompress = true
			fileCacheKind = zstdCacheKind
			fileEncoding = "zstd"
		case ctx.Request.Header.HasAcceptEncodingBytes(strGzip):
			mustCompress = true
			fileCacheKind = gzipCacheKind
			fileEncoding = "gzip"
		}
	}

	ff, ok := h.cacheManager.GetFileFromCache(fileCacheKind, path)
	if !ok {
		filePath := h.pathToFilePath(path, hasTrailingSlash)

		var err error
		ff, err = h.openFSFile(filePath, mustCompress, fileEncoding)
		if mustCompress && err == errNoCreatePermission {
			ctx.Logger().Printf("insufficient permissions for saving compressed file for %q. Serving uncompressed file. "+
				"Allow write access to the directory with this file in order to improve fasthttp performance", filePath)
			mustCompress = false
			ff, err = h.openFSFile(filePath, mustCompress, fileEncoding)
		}

		if errors.Is(err, errDirIndexRequired) {
			if !hasTrailingSlash {
				ctx.RedirectBytes(append(path, '/'), StatusFound)
				return
			}
			ff, err = h.openIndexFile(ctx, filePath, mustCompress, fileEncoding)
			if err != nil {
				ctx.Logger().Printf("cannot open dir index %q: %v", filePath, err)
				ctx.Error("Directory index is forbidden", StatusForbidden)
				return
			}
		} else if err != nil {
			ctx.Logger().Printf("cannot open file %q: %v", filePath, err)
			if h.pathNotFound == nil {
				ctx.Error("Cannot open requested path", StatusNotFound)
			} else {
				ctx.SetStatusCode(StatusNotFound)
				h.pathNotFound(ctx)
			}
			return
		}

		if h.generateETag {
			ff.etag = appendFSETag(nil, ff.lastModified, ff.contentLength)
		}

		ff = h.cacheManager.SetFileToCache(fileCacheKind, path, ff)
	}

	var notModified bool
	if ifNoneMatch := ctx.Request.Header.peekAll(strIfNoneMatch); h.generateETag && len(ifNoneMatch) > 0 {
		// If-Modified-Since is ignored when If-None-Match is present.
		// See https://www.rfc-editor.org/rfc/rfc9110#section-13.1.3
		if fsETagMatch(ifNoneMatch, ff.etag) {
			// Only GET and HEAD get 304, other methods get 412.
			// See https://www.rfc-editor.org/rfc/rfc9110#section-13.1.2
			if !ctx.IsGet() && !ctx.IsHead() {
				ff.decReadersCount()
				ctx.Response.Reset()
				ctx.SetStatusCode(StatusPreconditionFailed)
				return
			}
			notModified = true
		}
	} else if (ctx.IsGet() || ctx.IsHead()) && fsModTimeKnown(ff.lastModified) {
		// If-Modified-Since only applies to GET and HEAD.
		// See https://www.rfc-editor.org/rfc/rfc9110#section-13.1.3
		notModified = !ctx.IfModifiedSince(ff.lastModified)
	}
	if notModified {
		ctx.NotModified()
		// NotModified resets the response, so add back the Vary header
		// the 200 response would include.
		// See https://www.rfc-editor.org/rfc/rfc9110#section-15.4.5
		if ff.compressed {
			ctx.Response.Header.addVaryBytes(strAcceptEncoding)
		}
		if len(ff.etag) > 0 {
			ctx.Response.Header.SetBytesV(HeaderETag, ff.etag)
		}
		ff.decReadersCount()
		return
	}

	r, err := ff.NewReader()
	if err != nil {
		ff.decReadersCount()
		ctx.Logger().Printf("cannot obtain file reader for path=%q: %v", path, err)
		ctx.Error("Internal Server Error", StatusInternalServerError)
		return
	}

	hdr := &ctx.Response.Header
	if ff.compressed {
		switch fileEncoding {
		case "br":
			hdr.SetContentEncodingBytes(strBr)
			hdr.addVaryBytes(strAcceptEncoding)
		case "gzip":
			hdr.SetContentEncodingBytes(strGzip)
			hdr.addVaryBytes(strAcceptEncoding)
		case "zstd":
			hdr.SetContentEncodingBytes(strZstd)
			hdr.addVaryBytes(strAcceptEncoding)
		}
	}

	statusCode := StatusOK
	contentLength := ff.contentLength
	if h.acceptByteRange {
		hdr.setNonSpecial(strAcceptRanges, strBytes)
		if isSingleByteRange(byteRange) && fsIfRangeMatch(ctx.Request.Header.peek(strIfRange), ff.lastModified) {
			startPos, endPos, err := ParseByteRange(byteRange, contentLength)
			if err != nil {
				_ = r.(io.Closer).Close() //nolint:forcetypeassert
				ctx.Logger().Printf("cannot parse byte range %q for path=%q: %v", byteRange, path, err)
				ctx.Error("Range Not Satisfiable", StatusRequestedRangeNotSatisfiable)
				// Tell the client the current length, as RFC 9110 section 15.5.17 asks.
				hdr.Set(HeaderContentRange, "bytes */"+strconv.Itoa(contentLength))
				return
			}

			if err = r.(byteRangeUpdater).UpdateByteRange(startPos, endPos); err != nil { //nolint:forcetypeassert
				_ = r.(io.Closer).Close() //nolint:forcetypeassert
				ctx.Logger().Printf("cannot seek byte range %q for path=%q: %v", byteRange, path, err)
				ctx.Error("Internal Server Error", StatusInternalServerError)
				return
			}

			hdr.SetContentRange(startPos, endPos, contentLength)
			contentLength = endPos - startPos + 1
			statusCode = StatusPartialContent
		}
	}

	if fsModTimeKnown(ff.lastModified) {
		hdr.setNonSpecial(strLastModified, ff.lastModifiedStr)
	}
	if len(ff.etag) > 0 {
		hdr.SetBytesV(HeaderETag, ff.etag)
	}
	if !ctx.IsHead() {
		ctx.SetBodyStream(r, contentLength)
	} else {
		ctx.Response.ResetBody()
		ctx.Response.SkipBody = true
		ctx.Response.Header.SetContentLength(contentLength)
		if rc, ok := r.(io.Closer); ok {
			if err := rc.Close(); err != nil {
				ctx.Logger().Printf("cannot close file reader: %v", err)
				ctx.Error("Internal Server Error", StatusInternalServerError)
				return
			}
		}
	}
	hdr.noDefaultContentType = true
	if len(hdr.ContentType()) == 0 {
		ctx.SetContentType(ff.contentType)
	}
	ctx.SetStatusCode(statusCode)
}

// fsIfRangeMatch reports whether the Range header may be served given
// the If-Range header value. If-Range uses the strong comparison and FS
// only generates weak entity tags, so only a date equal to Last-Modified
// matches. See https://www.rfc-editor.org/rfc/rfc9110#section-13.1.5
func fsIfRangeMatch(ifRange []byte, lastModified time.Time) bool {
	if len(ifRange) == 0 {
		return true
	}
	t, err := ParseHTTPDate(ifRange)
	return err == nil && fsModTimeKnown(lastModified) && t.Equal(lastModified.Truncate(time.Second))
}

// fsModTimeKnown reports whether t is a modification time to tell clients
// and to compare their validators against. A filesystem without modification
// times, such as embed.FS, reports the zero time for every file, so that time
// stays the same when the file changes. The Unix epoch counts as unknown too.
func fsModTimeKnown(t time.Time) bool {
	return !t.IsZero() && !t.Equal(time.Unix(0, 0))
}

// appendFSETag appends a weak entity tag built from the hex-encoded
// modification time and size of the served file to dst.
//
// The tag is weak, since the modification time has one second resolution
// and compressed variants of the same file may have equal sizes, so it cannot
// guarantee byte-for-byte equality. It is not appended if the modification
// time is unknown.
func appendFSETag(dst []byte, lastModified time.Time, size int) []byte {
	mtime := lastModified.Unix()
	if mtime <= 0 {
		return dst
	}
	dst = append(dst, `W/"`...)
	dst = strconv.AppendInt(dst, mtime, 16)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, int64(size), 16)
	return append(dst, '"')
}

// fsETagMatch reports whether the given If-None-Match header values match
// etag using the weak comparison. Multiple header lines are treated the same
// as a single comma-separated list. The combined field value must be either
// a lone "*" or a comma-separated list of entity tags. Any malformed value
// counts as no match.
//
// See https://www.rfc-editor.org/rfc/rfc9110#section-13.1.2
func fsETagMatch(ifNoneMatch [][]byte, etag []byte) bool {
	etag = trimWeakETagPrefix(etag)
	matched, star := false, false
	elements := 0
	for _, v := range ifNoneMatch {
		for {
			// Empty list elements are allowed.
			// See https://www.rfc-editor.org/rfc/rfc9110#section-5.6.1.2
			v = bytes.TrimLeft(v, " \t,")
			if len(v) == 0 {
				break
			}
			elements++
			if v[0] == '*' {
				star = true
				v = v[1:]
			} else {
				tag, rest, ok := nextETag(v)
				if !ok {
					return false
				}
				if len(etag) > 0 && bytes.Equal(tag, etag) {
					matched = true
				}
				v = rest
			}
			// Elements must be separated by a comma.
			v = bytes.TrimLeft(v, " \t")
			if len(v) > 0 && v[0] != ',' {
				return false
			}
		}
	}
	if star {
		// "*" is only valid as the whole field value.
		return elements == 1
	}
	return matched
}

// nextETag parses the entity tag at the start of b. It returns the tag
// without the weak prefix and the rest of b. ok is false if b does not start
// with a valid entity tag.
func nextETag(b []byte) (tag, rest []byte, ok bool) {
	b = trimWeakETagPrefix(b)
	if len(b) < 2 || b[0] != '"' {
		return nil, nil, false
	}
	n := bytes.IndexByte(b[1:], '"')
	if n < 0 || !validETagChars(b[1:n+1]) {
		return nil, nil, false
	}
	return b[:n+2], b[n+2:], true
}

// validETagChars reports whether b holds only characters allowed inside
// the quotes of an entity tag.
//
// See https://www.rfc-editor.org/rfc/rfc9110#section-8.8.3
func validETagChars(b []byte) bool {
	for _, c := range b {
		// etagc = "!" / %x23-7E / obs-text
		if c != '!' && (c < 0x23 || c > 0x7e) && c < 0x80 {
			return false
		}
	}
	return true
}

func trimWeakETagPrefix(etag []byte) []byte {
	if len(etag) >= 2 && etag[0] == 'W' && etag[1] == '/' {
		return etag[2:]
	}
	return etag
}

type byteRangeUpdater interface {
	UpdateByteRange(startPos, endPos int) error
}

// isSingleByteRange reports whether byteRange asks for a single range in
// bytes, the only kind of Range the FS handler serves. Any other Range is
// ignored and the whole file is sent: RFC 9110, section 14.2 allows a server
// to ignore Range and requires it for a range unit it does not understand.
func isSingleByteRange(byteRange []byte) bool {
	return len(byteRange) > len(strBytes) && byteRange[len(strBytes)] == '=' &&
		bytes.HasPrefix(byteRange, strBytes) && bytes.IndexByte(byteRange, ',') < 0
}

// ParseByteRange parses 'Range: bytes=...' header value.
//
// It follows https://www.w3.org/Protocols/rfc2616/rfc2616-sec14.html#sec14.35 .
func ParseByteRange(byteRange []byte, contentLength int) (startPos, endPos int, err error) {
	b := byteRange
	if !bytes.HasPrefix(b, strBytes) {
		return 0, 0, fmt.Errorf("unsupported range units: %q: expecting %q", byteRange, strBytes)
	}

	b = b[len(strBytes):]
	if len(b) == 0 || b[0] != '=' {
		return 0, 0, fmt.Errorf("missing byte range in %q", byteRange)
	}
	b = b[1:]

	n := bytes.IndexByte(b, '-')
	if n < 0 {
		return 0, 0, fmt.Errorf("missing the end position of byte range in %q", byteRange)
	}

	if n == 0 {
		v, err := ParseUint(b[n+1:])
		if err != nil {
			return 0, 0, err
		}
		if contentLength <= 0 {
			return 0, 0, fmt.Errorf("byte range %q is invalid for empty content", byteRange)
		}
		if v == 0 {
			// A suffix range with a zero suffix-length selects no bytes
			// and is unsatisfiable (RFC 9110, section 14.1.1).
			return 0, 0, fmt.Errorf("suffix length in byte range %q must be greater than zero", byteRange)
		}
		startPos := max(contentLength-v, 0)
		return startPos, contentLength - 1, nil
	}

	if startPos, err = ParseUint(b[:n]); err != nil {
		return 0, 0, err
	}
	if startPos >= contentLength {
		return 0, 0, fmt.Errorf("the start position of byte range cannot exceed %d. byte range %q", contentLength-1, byteRange)
	}

	b = b[n+1:]
	if len(b) == 0 {
		return startPos, contentLength - 1, nil
	}

	if endPos, err = ParseUint(b); err != nil {
		return 0, 0, err
	}
	if endPos >= contentLength {
		endPos = contentLength - 1
	}
	if endPos < startPos {
		return 0, 0, fmt.Errorf("the start position of byte range cannot exceed the end position. byte range %q", byteRange)
	}
	return startPos, endPos, nil
}

func (h *fsHandler) openIndexFile(ctx *RequestCtx, dirPath string, mustCompress bool, fileEncoding string) (*fsFile, error) {
	for _, indexName := range h.indexNames {
		indexFilePath := indexName
		if dirPath != "" {
			indexFilePath = dirPath + "/" + indexName
		}

		ff, err := h.openFSFile(indexFilePath, mustCompress, fileEncoding)
		if err == nil {
			return ff, nil
		}
		if mustCompress && err == errNoCreatePermission {
			ctx.Logger().Printf("insufficient permissions for saving compressed file for %q. Serving uncompressed file. "+
				"Allow write access to the directory with this file in order to improve fasthttp performance", indexFilePath)
			mustCompress = false
			return h.openFSFile(indexFilePath, mustCompress, fileEncoding)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot open file %q: %w", indexFilePath, err)
		}
	}

	if !h.generateIndexPages {
		return nil, fmt.Errorf("cannot access directory without index page: directory %q", dirPath)
	}

	return h.createDirIndex(ctx, dirPath, mustCompress, fileEncoding)
}

var (
	errDirIndexRequired   = errors.New("directory index required")
	errNoCreatePermission = errors.New("no 'create file' permissions")
)

func (h *fsHandler) createDirIndex(ctx *RequestCtx, dirPath string, mustCompress bool, fileEncoding string) (*fsFile, error) {
	w := &bytebufferpool.ByteBuffer{}

	base := ctx.URI()

	// io/fs doesn't support ReadDir with empty path.
	if dirPath == "" {
		dirPath = "."
	}

	basePathEscaped := html.EscapeString(string(base.Path()))
	_, _ = fmt.Fprintf(w, "<html><head><title>%s</title><style>.dir { font-weight: bold }</style></head><body>", basePathEscaped)
	_, _ = fmt.Fprintf(w, "<h1>%s</h1>", basePathEscaped)
	_, _ = fmt.Fprintf(w, "<ul>")

	// The links are percent-encoded paths. A file name is no URI reference:
	// '?', '#' and '%' in it start no query, fragment or escape.
	if len(basePathEscaped) > 1 {
		parentPath := bytes.TrimSuffix(base.Path(), strSlash)
		parentPath = parentPath[:bytes.LastIndexByte(parentPath, '/')+1]
		parentPathEscaped := html.EscapeString(string(appendQuotedPath(nil, parentPath)))
		_, _ = fmt.Fprintf(w, `<li><a href="%s" class="dir">..</a></li>`, parentPathEscaped)
	}

	dirEntries, err := fs.ReadDir(h.filesystem, dirPath)
	if err != nil {
		return nil, err
	}

	fm := make(map[string]fs.FileInfo, len(dirEntries))
	filenames := make([]string, 0, len(dirEntries))
nestedContinue:
	for _, de := range dirEntries {
		name := de.Name()
		for _, cfs := range h.compressedFileSuffixes {
			if strings.HasSuffix(name, cfs) {
				// Do not show compressed files on index page.
				continue nestedContinue
			}
		}
		fi, err := de.Info()
		if err != nil {
			ctx.Logger().Printf("cannot fetch information from dir entry %q: %v, skip", name, err)

			continue nestedContinue
		}

		fm[name] = fi
		filenames = append(filenames, name)
	}

	dirURI := appendQuotedPath(nil, base.Path())
	if dirURI[len(dirURI)-1] != '/' {
		dirURI = append(dirURI, '/')
	}

	var href []byte
	sort.Strings(filenames)
	for _, name := range filenames {
		href = appendQuotedPath(append(href[:0], dirURI...), s2b(name))
		fi := fm[name]
		if fi.IsDir() {
			// A link to a directory without the trailing slash gets a redirect.
			href = append(href, '/')
		}
		pathEscaped := html.EscapeString(string(href))
		auxStr := "dir"
		className := "dir"
		if !fi.IsDir() {
			auxStr = fmt.Sprintf("file, %d bytes", fi.Size())
			className = "file"
		}
		_, _ = fmt.Fprintf(w, `<li><a href="%s" class="%s">%s</a>, %s, last modified %s</li>`,
			pathEscaped, className, html.EscapeString(name), auxStr, fsModTime(fi.ModTime()))
	}

	_, _ = fmt.Fprintf(w, "</ul></body></html>")

	if mustCompress {
		var zbuf bytebufferpool.ByteBuffer
		switch fileEncoding {
		case "br":
			zbuf.B = AppendBrotliBytesLevel(zbuf.B, w.B, CompressDefaultCompression)
		case "gzip":
			zbuf.B = AppendGzipBytesLevel(zbuf.B, w.B, CompressDefaultCompression)
		case "zstd":
			zbuf.B = AppendZstdBytesLevel(zbuf.B, w.B, CompressZstdDefault)
		}
		w = &zbuf
	}

	dirIndex := w.B
	lastModified := time.Now()
	ff := &fsFile{
		h:               h,
		dirIndex:        dirIndex,
		contentType:     "text/html; charset=utf-8",
		contentLength:   len(dirIndex),
		compressed:      mustCompress,
		lastModified:    lastModified,
		lastModifiedStr: AppendHTTPDate(nil, lastModified),

		t: lastModified,
	}
	return ff, nil
}

const (
	fsMinCompressRatio        = 0.8
	fsMaxCompressibleFileSize = 8 * 1024 * 1024
)

func (h *fsHandler) compressAndOpenFSFile(filePath, fileEncoding string) (*fsFile, error) {
	f, err := h.filesystem.Open(filePath)
	if err != nil {
		return nil, err
	}

	fileInfo, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cannot obtain info for file %q: %w", filePath, err)
	}

	if fileInfo.IsDir() {
		_ = f.Close()
		return nil, errDirIndexRequired
	}

	if strings.HasSuffix(filePath, h.compressedFileSuffixes[fileEncoding]) ||
		fileInfo.Size() > fsMaxCompressibleFileSize ||
		!isFileCompressible(f, fsMinCompressRatio) {
		return h.newFSFile(f, fileInfo, false, filePath, "")
	}

	compressedFilePath := h.filePathToCompressed(filePath)

	o, ok := h.filesystem.(*osFS)
	if !ok {
		return h.newCompressedFSFileCache(f, fileInfo, compressedFilePath, fileEncoding)
	}

	compressedFilePath += h.compressedFileSuffixes[fileEncoding]

	absPath, err := filepath.Abs(compressedFilePath)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cannot determine absolute path for %q: %v", compressedFilePath, err)
	}

	flock := acquireFileLock(absPath)
	flock.mu.Lock()
	defer func() {
		flock.mu.Unlock()
		releaseFileLock(absPath, flock)
	}()
	return h.compressFileNolock(o.compressRoot, f, fileInfo, filePath, compressedFilePath, fileEncoding)
}

// compressFileNolock writes the compressed copy of f to compressedFilePath
// in cache, the root of the compressed files, and opens it.
func (h *fsHandler) compressFileNolock(
	cache osRoot, f fs.File, fileInfo fs.FileInfo, filePath, compressedFilePath, fileEncoding string,
) (*fsFile, error) {
	// Attempt to open compressed file created by another concurrent
	// goroutine.
	// It is safe opening such a file, since the file creation
	// is guarded by file mutex - see getFileLock call.
	if cached, err := cache.open(compressedFilePath); err == nil {
		_ = f.Close()
		return h.newCompressedFSFile(cached, compressedFilePath, fileEncoding)
	} else if !errors.Is(err, fs.ErrNotExist) {
		_ = f.Close()
		return nil, fmt.Errorf("cannot open compressed file %q: %w", compressedFilePath, err)
	}

	if h.compressRoot != h.root {
		if err := cache.mkdirParent(compressedFilePath, 0o750); err != nil {
			_ = f.Close()
			return nil, err
		}
	}

	// Create temporary file, so concurrent goroutines don't use
	// it until it is created.
	zf, tmpFilePath, err := cache.createTemp(compressedFilePath)
	if err != nil {
		_ = f.Close()
		if !errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("cannot create temporary file for %q: %w", compressedFilePath, err)
		}
		return nil, errNoCreatePermission
	}
	switch fileEncoding {
	case "br":
		zw := acquireStacklessBrotliWriter(zf, CompressDefaultCompression)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		// Flush can succeed while Close still fails writing the trailer. Keep
		// the first error so the cleanup below never publishes a truncated
		// compressed file.
		if errc := releaseStacklessBrotliWriter(zw, CompressDefaultCompression); err == nil {
			err = errc
		}
	case "gzip":
		zw := acquireStacklessGzipWriter(zf, CompressDefaultCompression)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		if errc := releaseStacklessGzipWriter(zw, CompressDefaultCompression); err == nil {
			err = errc
		}
	case "zstd":
		zw := acquireStacklessZstdWriter(zf, CompressZstdDefault)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		if errc := releaseStacklessZstdWriter(zw, CompressZstdDefault); err == nil {
			err = errc
		}
	}
	if errc := zf.Close(); err == nil {
		err = errc
	}
	_ = f.Close()
	if err != nil {
		_ = cache.remove(tmpFilePath)
		return nil, fmt.Errorf("error when compressing file %q to %q: %w", filePath, tmpFilePath, err)
	}
	if err = cache.chtimes(tmpFilePath, time.Now(), fileInfo.ModTime()); err != nil {
		_ = cache.remove(tmpFilePath)
		return nil, fmt.Errorf("cannot change modification time to %v for tmp file %q: %v",
			fileInfo.ModTime(), tmpFilePath, err)
	}
	if err = cache.rename(tmpFilePath, compressedFilePath); err != nil {
		_ = cache.remove(tmpFilePath)
		return nil, fmt.Errorf("cannot move compressed file from %q to %q: %w", tmpFilePath, compressedFilePath, err)
	}
	cached, err := cache.open(compressedFilePath)
	if err != nil {
		return nil, fmt.Errorf("cannot open compressed file %q: %w", compressedFilePath, err)
	}
	return h.newCompressedFSFile(cached, compressedFilePath, fileEncoding)
}

// newCompressedFSFileCache use memory cache compressed files.
func (h *fsHandler) newCompressedFSFileCache(f fs.File, fileInfo fs.FileInfo, filePath, fileEncoding string) (*fsFile, error) {
	var (
		w   = &bytebufferpool.ByteBuffer{}
		err error
	)

	switch fileEncoding {
	case "br":
		zw := acquireStacklessBrotliWriter(w, CompressDefaultCompression)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		_ = releaseStacklessBrotliWriter(zw, CompressDefaultCompression)
	case "gzip":
		zw := acquireStacklessGzipWriter(w, CompressDefaultCompression)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		_ = releaseStacklessGzipWriter(zw, CompressDefaultCompression)
	case "zstd":
		zw := acquireStacklessZstdWriter(w, CompressZstdDefault)
		_, err = copyZeroAlloc(zw, f)
		if errf := zw.Flush(); err == nil {
			err = errf
		}
		_ = releaseStacklessZstdWriter(zw, CompressZstdDefault)
	}
	defer func() { _ = f.Close() }()

	if err != nil {
		return nil, fmt.Errorf("error when compressing file %q: %w", filePath, err)
	}

	seeker, ok := f.(io.Seeker)
	if !ok {
		return nil, errors.New("seek is not implemented")
	}
	if _, err = seeker.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}

	ext := fileExtension(fileInfo.Name(), false, h.compressedFileSuffixes[fileEncoding])
	contentType := mime.TypeByExtension(ext)
	if contentType == "" {
		data, err := readFileHeader(f, false, fileEncoding)
		if err != nil {
			return nil, fmt.Errorf("cannot read header of the file %q: %w", fileInfo.Name(), err)
		}
		contentType = http.DetectContentType(data)
	}

	dirIndex := w.B
	lastModified := fileInfo.ModTime()
	ff := &fsFile{
		h:               h,
		dirIndex:        dirIndex,
		contentType:     contentType,
		contentLength:   len(dirIndex),
		compressed:      true,
		lastModified:    lastModified,
		lastModifiedStr: AppendHTTPDate(nil, lastModified),

		t: time.Now(),
	}

	return ff, nil
}

// newCompressedFSFile uses the compressed copy FS opened from its disk cache.
func (h *fsHandler) newCompressedFSFile(f fs.File, filePath, fileEncoding string) (*fsFile, error) {
	fileInfo, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cannot obtain info for compressed file %q: %w", filePath, err)
	}
	ff, err := h.newFSFile(f, fileInfo, true, filePath, fileEncoding)
	if err != nil {
		return nil, err
	}
	ff.inCompressRoot = true
	return ff, nil
}

func (h *fsHandler) openFSFile(filePath string, mustCompress bool, fileEncoding string) (*fsFile, error) {
	filePathOriginal := filePath
	if mustCompress {
		filePath += h.compressedFileSuffixes[fileEncoding]
	}
	f, err := h.filesystem.Open(filePath)
	if err != nil {
		if mustCompress && errors.Is(err, fs.ErrNotExist) {
			return h.compressAndOpenFSFile(filePathOriginal, fileEncoding)
		}

		// If the file is not found and the path is empty, let's return errDirIndexRequired error.
		if filePath == "" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid)) {
			return nil, errDirIndexRequired
		}

		return nil, err
	}

	fileInfo, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cannot obtain info for file %q: %w", filePath, err)
	}

	if fileInfo.IsDir() {
		_ = f.Close()
		if mustCompress {
			return nil, fmt.Errorf("directory with unexpected suffix found: %q: suffix: %q",
				filePath, h.compressedFileSuffixes[fileEncoding])
		}
		return nil, errDirIndexRequired
	}

	if mustCompress {
		fileInfoOriginal, err := fs.Stat(h.filesystem, filePathOriginal)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("cannot obtain info for original file %q: %w", filePathOriginal, err)
		}

		// Only re-create the compressed file if there was more than a second between the mod times.
		// On macOS the gzip seems to truncate the nanoseconds in the mod time causing the original file
		// to look newer than the gzipped file.
		if fileInfoOriginal.ModTime().Sub(fileInfo.ModTime()) >= time.Second {
			// The compressed file became stale. Re-create it.
			_ = f.Close()
			// Only remove it from the OS filesystem. A custom FS.FS is
			// read-only here, and filePath is relative to it rather than
			// to the working directory.
			if o, ok := h.filesystem.(*osFS); ok {
				_ = o.root.remove(filePath)
			}
			return h.compressAndOpenFSFile(filePathOriginal, fileEncoding)
		}
	}

	return h.newFSFile(f, fileInfo, mustCompress, filePath, fileEncoding)
}

func (h *fsHandler) newFSFile(f fs.File, fileInfo fs.FileInfo, compressed bool, filePath, fileEncoding string) (*fsFile, error) {
	n := fileInfo.Size()
	contentLength := int(n)
	if n != int64(contentLength) {
		_ = f.Close()
		return nil, fmt.Errorf("too big file: %d bytes", n)
	}

	// detect content-type
	ext := fileExtension(fileInfo.Name(), compressed, h.compressedFileSuffixes[fileEncoding])
	contentType := mime.TypeByExtension(ext)
	if contentType == "" {
		data, err := readFileHeader(f, compressed, fileEncoding)
		if err != nil {
			return nil, fmt.Errorf("cannot read header of the file %q: %w", fileInfo.Name(), err)
		}
		contentType = http.DetectContentType(data)
	}

	lastModified := fileInfo.ModTime()
	ff := &fsFile{
		h:               h,
		f:               f,
		filename:        filePath,
		contentType:     contentType,
		contentLength:   contentLength,
		compressed:      compressed,
		lastModified:    lastModified,
		lastModifiedStr: AppendHTTPDate(nil, lastModified),

		t: time.Now(),
	}

	// A small file going into the cache is read into memory once, so the
	// requests it serves don't read the file again and its descriptor isn't
	// held open while cached. ReadAt doesn't depend on the file offset, which
	// content type and compressibility checks may have moved. A negative size,
	// which a non-regular file may report, keeps the file streamed.
	if ra, ok := f.(io.ReaderAt); ok && !h.skipCache &&
		contentLength >= 0 && contentLength <= maxSmallFileSize && h.reserveSmallFileInMemory() {
		data := make([]byte, contentLength)
		n, err := ra.ReadAt(data, 0)
		_ = f.Close()
		if err != nil && err != io.EOF {
			h.smallFilesInMemory.Add(-1)
			return nil, fmt.Errorf("cannot read file %q: %w", filePath, err)
		}
		// A file that shrank since Stat is served as read.
		ff.f = nil
		ff.dirIndex = data[:n]
		ff.contentLength = n
		ff.countedInMemory = true
	}
	return ff, nil
}

// reserveSmallFileInMemory counts one more small file held in memory and
// reports whether it stays within maxSmallFilesInMemory.
func (h *fsHandler) reserveSmallFileInMemory() bool {
	for {
		n := h.smallFilesInMemory.Load()
		if n >= maxSmallFilesInMemory {
			return false
		}
		if h.smallFilesInMemory.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func readFileHeader(f io.Reader, compressed bool, fileEncoding string) ([]byte, error) {
	r := f
	var (
		br  *brotli.Reader
		zr  *gzip.Reader
		zsr *zstd.Decoder
	)
	if compressed {
		var err error
		switch fileEncoding {
		case "br":
			br = acquireBrotliReader(f)
			r = br
		case "gzip":
			if zr, err = acquireGzipReader(f); err != nil {
				return nil, err
			}
			r = zr
		case "zstd":
			if zsr, err = acquireZstdReader(f); err != nil {
				return nil, err
			}
			r = zsr
		}
	}

	lr := &io.LimitedReader{
		R: r,
		N: 512,
	}
	data, err := io.ReadAll(lr)
	seeker, ok := f.(io.Seeker)
	if !ok {
		return nil, errors.New("must implement seek")
	}
	if _, err := seeker.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}

	if br != nil {
		releaseBrotliReader(br)
	}

	if zr != nil {
		releaseGzipReader(zr)
	}

	if zsr != nil {
		releaseZstdReader(zsr)
	}

	return data, err
}

func stripLeadingSlashes(path []byte, stripSlashes int) []byte {
	for stripSlashes > 0 && len(path) > 0 {
		if path[0] != '/' {
			// developer sanity-check
			panic("BUG: path must start with slash")
		}
		n := bytes.IndexByte(path[1:], '/')
		if n < 0 {
			path = path[:0]
			break
		}
		path = path[n+1:]
		stripSlashes--
	}
	return path
}

func hasDotDotPathSegment(path []byte) bool {
	segmentStart := 0
	for i, c := range path {
		if c != '/' && (filepath.Separator != '\\' || c != '\\') {
			continue
		}
		if i-segmentStart == 2 && path[segmentStart] == '.' && path[segmentStart+1] == '.' {
			return true
		}
		segmentStart = i + 1
	}
	return len(path)-segmentStart == 2 &&
		path[segmentStart] == '.' &&
		path[segmentStart+1] == '.'
}

func fileExtension(path string, compressed bool, compressedFileSuffix string) string {
	if compressed && strings.HasSuffix(path, compressedFileSuffix) {
		path = path[:len(path)-len(compressedFileSuffix)]
	}
	n := strings.LastIndexByte(path, '.')
	if n < 0 {
		return ""
	}
	return path[n:]
}

// FileLastModified returns last modified time for the file.
func FileLastModified(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return zeroTime, err
	}
	fileInfo, err := f.Stat()
	_ = f.Close()
	if err != nil {
		return zeroTime, err
	}
	return fsModTime(fileInfo.ModTime()), nil
}

func fsModTime(t time.Time) time.Time {
	return t.In(time.UTC).Truncate(time.Second)
}

var (
	filesLockMu  sync.Mutex
	filesLockMap = make(map[string]*fileLock)
)

type fileLock struct {
	mu sync.Mutex
	// refs counts goroutines that hold or are waiting on mu.
	refs int
}

func acquireFileLock(absPath string) *fileLock {
	filesLockMu.Lock()
	flock := filesLockMap[absPath]
	if flock == nil {
		flock = &fileLock{}
		filesLockMap[absPath] = flock
	}
	flock.refs++
	filesLockMu.Unlock()
	return flock
}

func releaseFileLock(absPath string, flock *fileLock) {
	filesLockMu.Lock()
	flock.refs--
	if flock.refs == 0 && filesLockMap[absPath] == flock {
		delete(filesLockMap, absPath)
	}
	filesLockMu.Unlock()
}

var _ fs.StatFS = (*osFS)(nil)

// errOutsideRoot is reported for a path outside the root directory it is
// resolved in. Such a path names nothing FS may serve, so it counts as not
// existing.
var errOutsideRoot = fmt.Errorf("path is outside the FS root directory: %w", fs.ErrNotExist)

// osFS is the filesystem FS uses when FS.FS is nil. Its methods take the OS
// paths fsHandler builds from Root and CompressRoot.
//
// The root a path is resolved in depends on what FS does with it, not on
// the path itself. Open and Stat, which FS uses for the requested files,
// index files and directory listings, resolve paths in Root, while the
// compressed copies FS writes are created and opened in CompressRoot. Each
// root is confined on its own, so a CompressRoot inside Root, or one that
// is a whole volume, doesn't change how paths in Root are resolved.
type osFS struct {
	root         osRoot
	compressRoot osRoot
}

// newOSFS returns the osFS for the normalized root and compressRoot.
func newOSFS(root, compressRoot string, allowSymlinksOutsideRoot bool) *osFS {
	return &osFS{
		root:         newOSRoot(root, allowSymlinksOutsideRoot),
		compressRoot: newOSRoot(compressRoot, allowSymlinksOutsideRoot),
	}
}

func (o *osFS) Open(name string) (fs.File, error) {
	f, err := o.root.open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (o *osFS) Stat(name string) (fs.FileInfo, error) {
	return o.root.stat(name)
}

// osRoot resolves paths inside the directory dir with os.Root, so neither
// a ".." component nor a symbolic link can lead outside it. The directory
// is opened for each operation instead of once, so FS keeps following it
// by name, as it did with plain paths, when the directory is replaced or
// dir is a symbolic link that gets switched to another directory.
//
// If dir is empty, paths are used as they are.
type osRoot struct {
	dir  string
	file string // A single-file root, which may itself be a symbolic link.
}

func newOSRoot(dir string, allowSymlinksOutsideRoot bool) osRoot {
	// An empty dir, or one that is only a volume name such as "C:", stands
	// for the whole filesystem (ServeFile serves absolute paths this way),
	// so there is no directory to confine paths to.
	if allowSymlinksOutsideRoot || isWholeFilesystemRoot(dir) {
		return osRoot{}
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		// Compressed copies and temporary files are siblings of a file root.
		// Preserve the path spelling: filepath.Dir would clean components
		// such as "./", preventing rel from matching the paths FS builds.
		parent := strings.TrimSuffix(dir, filepath.Base(dir))
		for parent != "" && os.IsPathSeparator(parent[len(parent)-1]) {
			parent = parent[:len(parent)-1]
		}
		if isWholeFilesystemRoot(parent) {
			parent = ""
		}
		return osRoot{dir: parent, file: dir}
	}
	return osRoot{dir: dir}
}

func isWholeFilesystemRoot(dir string) bool {
	return dir == "" || dir == filepath.VolumeName(dir)
}

// rel returns name relative to o.dir.
func (o osRoot) rel(name string) (string, error) {
	rest, ok := strings.CutPrefix(name, o.dir)
	if !ok || (rest != "" && !os.IsPathSeparator(rest[0])) {
		return "", &fs.PathError{Op: "open", Path: name, Err: errOutsideRoot}
	}
	// os.Root rejects names starting with a separator.
	for rest != "" && os.IsPathSeparator(rest[0]) {
		rest = rest[1:]
	}
	if rest == "" {
		rest = "."
	}
	return rest, nil
}

// openRoot opens o.dir, and returns name relative to it.
func (o osRoot) openRoot(name string) (*os.Root, string, error) {
	rel, err := o.rel(name)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(o.dir)
	if err != nil {
		return nil, "", err
	}
	return r, rel, nil
}

// open opens the file name. It returns an *os.File, which keeps sendfile
// and the other fast paths for big files.
func (o osRoot) open(name string) (*os.File, error) {
	if o.dir == "" || name == o.file {
		return os.Open(name)
	}
	rel, err := o.rel(name)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		// The root directory itself, which may be a symbolic link.
		return os.Open(name)
	}
	return os.OpenInRoot(o.dir, rel)
}

func (o osRoot) stat(name string) (fs.FileInfo, error) {
	if o.dir == "" || name == o.file {
		return os.Stat(name)
	}
	r, rel, err := o.openRoot(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Stat(rel)
}

// mkdirParent creates the directory the file name goes into, as
// os.MkdirAll(filepath.Dir(name), perm) does.
func (o osRoot) mkdirParent(name string, perm os.FileMode) error {
	if o.dir == "" {
		return os.MkdirAll(filepath.Dir(name), perm)
	}
	// Take the parent of the name relative to its root: filepath.Dir cleans
	// the whole path, and a root such as "/cwd/./cache" built from the
	// relative CompressRoot "./cache" would no longer be its prefix.
	rel, err := o.rel(name)
	if err != nil {
		return err
	}
	// The root comes from the FS configuration and is created as before.
	if err := os.MkdirAll(o.dir, perm); err != nil {
		return err
	}
	parent := filepath.Dir(rel)
	if parent == "." {
		return nil
	}
	r, err := os.OpenRoot(o.dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.MkdirAll(parent, perm)
}

// createTemp creates a new file in the directory of name, to be renamed to
// name once it is written, and returns it and its path.
//
// The file gets a random name and is opened with O_EXCL and 0600, so a
// symlink pre-planted at an otherwise predictable temp path can't be
// followed to truncate an arbitrary file, and the cache file isn't left
// group/world-readable. Its base name is short and independent of name's,
// so it doesn't limit how long the compressed file's name may be.
func (o osRoot) createTemp(name string) (*os.File, string, error) {
	// os.Root has no CreateTemp, so do what os.CreateTemp does, with a
	// random part that can't be guessed. The directory is taken from name
	// as it is, since filepath.Dir would clean it and a root such as
	// "/cwd/./cache" would no longer be its prefix.
	tmpName := strings.TrimSuffix(name, filepath.Base(name)) + ".fasthttp-" + rand.Text() + ".tmp"
	const flag = os.O_RDWR | os.O_CREATE | os.O_EXCL
	if o.dir == "" {
		f, err := os.OpenFile(tmpName, flag, 0o600)
		if err != nil {
			return nil, "", err
		}
		return f, tmpName, nil
	}
	r, rel, err := o.openRoot(tmpName)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, flag, 0o600)
	if err != nil {
		return nil, "", err
	}
	return f, tmpName, nil
}

func (o osRoot) chtimes(name string, atime, mtime time.Time) error {
	if o.dir == "" {
		return os.Chtimes(name, atime, mtime)
	}
	r, rel, err := o.openRoot(name)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Chtimes(rel, atime, mtime)
}

func (o osRoot) rename(oldname, newname string) error {
	if o.dir == "" {
		return os.Rename(oldname, newname)
	}
	newRel, err := o.rel(newname)
	if err != nil {
		return err
	}
	r, oldRel, err := o.openRoot(oldname)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Rename(oldRel, newRel)
}

func (o osRoot) remove(name string) error {
	if o.dir == "" {
		return os.Remove(name)
	}
	r, rel, err := o.openRoot(name)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Remove(rel)
}
