package server

import (
	"errors"
	"io"
	"net/http"

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
	raw, err := io.ReadAll(c.Request.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		abort(c, bodyTooLarge(tooLarge.Limit))
		return
	case err != nil:
		abort(c, err)
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
	if c.GetHeader("If-None-Match") == etag {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "image/jpeg", img.Bytes)
}

// errNoImage is the refusal of a sale's image that does not exist.
var errNoImage = seckill.Errorf(seckill.CodeNotFound, "This sale has no image.")
