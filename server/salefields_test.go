package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/seckill/seckill"
)

// everyField is a sale with every field set, each to a value of its own
// that the rules accept. A field added to seckill.Sale and not here fails
// TestSaleFieldsAgree at once.
func everyField(merchant int64) seckill.Sale {
	start := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	return seckill.Sale{
		ID: 1, Name: "Every field", Item: "Field item", PriceCents: 1234, Total: 70, PerUserLimit: 3,
		StartsAt: start, EndsAt: start.Add(2 * time.Hour), Status: seckill.StatusPaused, Buckets: 2,
		RequireTicket: true, PowDifficulty: 4, VerifiedOnly: true, WaitingRoom: true,
		QueueOpensAt: start.Add(-7 * time.Minute), AdmitPerSecond: 55, MerchantID: merchant, InstantCheckout: true,
		Description: "A line\nand another", ImageETag: "0123456789abcdef0123456789abcdef",
		CreatedAt: start.Add(-time.Hour), UpdatedAt: start.Add(-time.Minute),
	}
}

// The fields of a sale that no request sets: its id, its status (set by
// pause, resume and end), its image (set by an upload), and its times of
// creation and last change.
var notInput = []string{"ID", "Status", "ImageETag", "CreatedAt", "UpdatedAt"}

// TestSaleFieldsAgree holds every spelling of a sale's fields to
// seckill.Sale: the request (seckill.SaleInput and its JSON names, Apply,
// Input), the audit row's fields (SaleChanges), the settings the buy path
// reads from Redis (seckill.Stock: StockOf and the warm-up's codec), the
// ledger's row (insert and update read back) and the API's answer. A field
// added in one place and forgotten in another fails it. (The live-stock
// frame carries counts and the status, no setting.)
func TestSaleFieldsAgree(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	r := call(t, st.h, "POST", "/admin/api/merchants", map[string]any{"email": "fields@shop.example", "name": "F", "password": "merchant password"}, admin())
	if r.Status != 201 {
		t.Fatal(r)
	}
	want := everyField(num(r.Body, "id"))
	saleType := reflect.TypeFor[seckill.Sale]()
	for i := range saleType.NumField() {
		if reflect.ValueOf(want).Field(i).IsZero() {
			t.Fatalf("everyField leaves %s zero: give it a value", saleType.Field(i).Name)
		}
	}

	// The request: every field but notInput has its JSON name in
	// SaleInput, the same Go name and type; Input and NewSale carry it.
	names := map[string]string{} // Go name → API name
	inputType := reflect.TypeFor[seckill.SaleInput]()
	for _, f := range reflect.VisibleFields(inputType) {
		if f.Anonymous {
			continue
		}
		sf, ok := saleType.FieldByName(f.Name)
		if !ok || f.Type != reflect.PointerTo(sf.Type) {
			t.Errorf("SaleInput.%s has no field %s of type %s in Sale", f.Name, f.Name, f.Type.Elem())
		}
		names[f.Name] = f.Tag.Get("json")
	}
	for i := range saleType.NumField() {
		name := saleType.Field(i).Name
		if _, ok := names[name]; !ok && !slices.Contains(notInput, name) {
			t.Errorf("Sale.%s is neither in SaleInput nor set otherwise (notInput)", name)
		}
	}
	made, err := want.Input().NewSale()
	made.ID, made.Status, made.CreatedAt, made.UpdatedAt, made.ImageETag = want.ID, want.Status, want.CreatedAt, want.UpdatedAt, want.ImageETag
	if err != nil || !reflect.DeepEqual(made, want) {
		t.Errorf("Input().NewSale():\n%+v (%v)\nwant\n%+v", made, err, want)
	}
	// Apply sets each field of a patch, and that field only.
	patchType := reflect.TypeFor[seckill.SalePatch]()
	for i := range patchType.NumField() {
		f := patchType.Field(i)
		var p seckill.SalePatch
		v := reflect.ValueOf(want).FieldByName(f.Name)
		ptr := reflect.New(v.Type())
		ptr.Elem().Set(v)
		reflect.ValueOf(&p).Elem().Field(i).Set(ptr)
		got := reflect.ValueOf(seckill.Sale{}.Apply(p))
		for j := range saleType.NumField() {
			set := !got.Field(j).IsZero()
			if set != (saleType.Field(j).Name == f.Name) {
				t.Errorf("Apply of %s sets Sale.%s: %v", f.Name, saleType.Field(j).Name, set)
			}
		}
	}

	// The audit row: every setting by its API name (the status and the
	// image too).
	_, after := seckill.SaleChanges(seckill.Sale{}, want)
	var audited map[string]any
	if err := json.Unmarshal(after, &audited); err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"status", "image_etag"}
	for _, n := range names {
		wantNames = append(wantNames, n)
	}
	if got := keys(audited); !slices.Equal(got, sorted(wantNames)) {
		t.Errorf("SaleChanges names %v, want %v", got, sorted(wantNames))
	}

	// Redis: every setting Stock holds, from StockOf and through the
	// warm-up and back, equals the sale's.
	stockOf := seckill.StockOf(want)
	stockType := reflect.TypeFor[seckill.Stock]()
	counters := []string{"Available", "Sold"}
	for i := range stockType.NumField() {
		if n := stockType.Field(i).Name; !slices.Contains(counters, n) && reflect.ValueOf(stockOf).Field(i).IsZero() {
			t.Errorf("StockOf leaves Stock.%s zero", n)
		}
	}

	// The ledger: inserted, read back, changed in every field, read back.
	now := time.Now().UTC().Truncate(time.Millisecond)
	stored, err := st.Ledger.InsertSale(ctx, want, now)
	if err != nil {
		t.Fatal(err)
	}
	want.ID, want.CreatedAt, want.UpdatedAt = stored.ID, now, now
	if !reflect.DeepEqual(stored, want) {
		t.Errorf("the ledger's row reads back\n%+v\nwant\n%+v", stored, want)
	}
	changed := everyField(want.MerchantID)
	changed.ID, changed.CreatedAt, changed.Buckets, changed.InstantCheckout = want.ID, want.CreatedAt, want.Buckets, want.InstantCheckout // fixed
	changed.Name, changed.Item, changed.PriceCents, changed.Total, changed.PerUserLimit = "Changed", "Other", 99, 80, 4
	changed.StartsAt, changed.EndsAt, changed.QueueOpensAt = want.StartsAt.Add(time.Minute), want.EndsAt.Add(time.Hour), want.QueueOpensAt.Add(-time.Minute)
	changed.Status, changed.RequireTicket, changed.PowDifficulty, changed.VerifiedOnly = seckill.StatusActive, false, 5, false
	changed.WaitingRoom, changed.AdmitPerSecond, changed.UpdatedAt = false, 66, now.Add(time.Second)
	changed.Description = "Changed description"
	changed.ImageETag = want.ImageETag // an update leaves the image: an upload changes it (TestSaleImages)
	for i := range saleType.NumField() {
		name := saleType.Field(i).Name
		if !slices.Contains([]string{"ID", "CreatedAt", "Buckets", "InstantCheckout", "MerchantID", "ImageETag"}, name) &&
			reflect.ValueOf(changed).Field(i).Interface() == reflect.ValueOf(want).Field(i).Interface() {
			t.Errorf("the update leaves %s as it was: change it too", name)
		}
	}
	if err := st.Ledger.UpdateSale(ctx, changed, changed.UpdatedAt); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Ledger.Sale(ctx, want.ID); err != nil || !reflect.DeepEqual(got, changed) {
		t.Errorf("the updated row reads back\n%+v (%v)\nwant\n%+v", got, err, changed)
	}

	// Redis's copy: warmed up from the sale, its settings read back.
	if _, err := st.Inventory.Warm(ctx, changed); err != nil {
		t.Fatal(err)
	}
	got, err := st.Inventory.Stock(ctx, changed.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStock := seckill.StockOf(changed)
	got.Available, got.Sold = 0, 0
	if !sameFields(got, wantStock) {
		t.Errorf("Redis's settings read back\n%+v\nwant\n%+v", got, wantStock)
	}

	// The API's answer names every setting as the request does.
	res := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d", changed.ID), nil, admin())
	if res.Status != 200 {
		t.Fatal(res)
	}
	for goName, api := range names {
		if _, ok := res.Body[api]; !ok {
			t.Errorf("the API's sale has no %q (Sale.%s)", api, goName)
		}
	}
	for _, api := range []string{"id", "status"} {
		if _, ok := res.Body[api]; !ok {
			t.Errorf("the API's sale has no %q", api)
		}
	}
	if res.Body["name"] != changed.Name || num(res.Body, "admit_per_second") != changed.AdmitPerSecond ||
		res.Body["waiting_room"] != changed.WaitingRoom || num(res.Body, "merchant_id") != changed.MerchantID {
		t.Errorf("the API's sale: %v", res.Body)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// sameFields compares two structs field by field, times as instants.
func sameFields(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if ta, ok := va.Field(i).Interface().(time.Time); ok {
			if !ta.Equal(vb.Field(i).Interface().(time.Time)) {
				return false
			}
		} else if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return false
		}
	}
	return true
}
