package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
)

// putSaleImage answers PUT /admin/api/sales/:id/image: the body is the
// image file itself (JPEG, PNG or WebP, at most image_max_bytes), which
// the sales service checks and makes anew; the answer is the sale.
func (s *Server) putSaleImage(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	// A file takes longer to arrive than a JSON body: its own deadline.
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(imageReadTimeout))
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		abort(c, readError(err))
		return
	}
	v, err := s.Sales.SetImage(c.Request.Context(), id, raw)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, s.saleView(v, s.Now(), true))
}

// deleteSaleImage answers DELETE /admin/api/sales/:id/image.
func (s *Server) deleteSaleImage(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	v, err := s.Sales.RemoveImage(c.Request.Context(), id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, s.saleView(v, s.Now(), true))
}

// saleImage answers GET /api/sales/:id/image: the JPEG, with its ETag.
// Asked by its versioned URL (?v= its ETag, as the sale's image_url
// gives it) it may be cached for a year, as that URL never names another
// image; otherwise for a minute.
func (s *Server) saleImage(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	img, err := s.Sales.Image(c.Request.Context(), id)
	if errors.Is(err, seckill.ErrNotFound) {
		err = errNoImage
	}
	if err != nil {
		abort(c, err)
		return
	}
	h := c.Writer.Header()
	etag := `"` + img.ETag + `"`
	h.Set("ETag", etag)
	if c.Query("v") == img.ETag {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "public, max-age=60")
	}
	if matches(c.GetHeader("If-None-Match"), img.ETag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "image/jpeg", img.Bytes)
}

// defaultImageMaxBytes is image_max_bytes' default (configs/seckill.yaml).
const defaultImageMaxBytes = 5 << 20

// imageReadTimeout is how long an image upload may take to arrive (5 MB
// at 1 Mbit/s, with room).
const imageReadTimeout = 2 * time.Minute

// matches says whether an If-None-Match header names etag: "*", or a list
// of entity tags compared weakly (W/ ignored), as RFC 9110 says.
func matches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == `"`+etag+`"` {
			return true
		}
	}
	return false
}

// errNoImage is the refusal of a sale's image that does not exist.
var errNoImage = seckill.Errorf(seckill.CodeNotFound, "This sale has no image.")
