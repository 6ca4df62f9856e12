#include <algorithm>
#include <cstring>

#include <prdma/format.hpp>
#include <prdma/mem/memory_registry.hpp>

namespace prdma::mem {

std::string_view fast_reg_result_name(FastRegResult result) {
    switch (result) {
    case FastRegResult::ok:
        return "ok";
    case FastRegResult::not_fast_reg_region:
        return "not_fast_reg_region";
    case FastRegResult::key_index_changed:
        return "key_index_changed";
    case FastRegResult::variant_not_changed:
        return "variant_not_changed";
    case FastRegResult::still_valid:
        return "still_valid";
    case FastRegResult::wrong_pd:
        return "wrong_pd";
    case FastRegResult::access_violation:
        return "access_violation";
    case FastRegResult::bad_access:
        return "bad_access";
    case FastRegResult::bad_page_list:
        return "bad_page_list";
    case FastRegResult::retired:
        return "retired";
    }
    return "unknown";
}

// ---- MemoryRegion ---------------------------------------------------------------------------

MemoryRegion::MemoryRegion(MemoryRegistry& registry, RegionKind kind, std::uint32_t pd,
                           std::uint32_t index)
    : registry_(&registry), kind_(kind), pd_(pd), index_(index) {}
MemoryRegion::~MemoryRegion() = default;

const KeyEntry& MemoryRegion::entry() const noexcept {
    return registry_->keys_.entry(index_);
}

std::uint64_t MemoryRegion::local_start() const noexcept {
    return entry().start;
}
std::uint64_t MemoryRegion::local_end() const noexcept {
    return entry().start + entry().length;
}

std::uint64_t MemoryRegion::remote_start() const noexcept {
    return rkey() != 0 ? entry().start : 0;
}
std::uint64_t MemoryRegion::remote_end() const noexcept {
    return rkey() != 0 ? entry().start + entry().length : 0;
}

AccessFlags MemoryRegion::access() const noexcept {
    return entry().access;
}
ConnectionId MemoryRegion::bound_connection() const noexcept {
    return entry().bound_connection;
}
bool MemoryRegion::valid() const noexcept {
    return entry().state == KeyState::valid;
}

MemoryKey MemoryRegion::lkey() const noexcept {
    return registry_->keys_.key_of(index_);
}

MemoryKey MemoryRegion::rkey() const noexcept {
    const KeyEntry& e = entry();
    if (e.state != KeyState::valid || e.lkey_only || !e.access.any_of(access_remote_any)) {
        return 0;
    }
    return registry_->keys_.key_of(index_);
}

Status MemoryRegion::export_descriptor(void* buffer, std::uint32_t* length) const {
    if (length == nullptr) {
        return Error(StatusCode::invalid_parameter, "descriptor length pointer is null");
    }
    constexpr std::uint32_t required = sizeof(RegionDescriptor);
    if (*length < required) {
        *length = required;
        return Error(StatusCode::buffer_too_small,
                     strformat("the descriptor needs %u bytes", required));
    }
    if (buffer == nullptr) {
        return Error(StatusCode::invalid_parameter,
                     "descriptor buffer is null but its length claims room");
    }
    const MemoryKey remote_key = rkey();
    if (remote_key == 0) {
        return Error(StatusCode::access_violation,
                     "the region grants no remote access; it has no descriptor to export");
    }
    RegionDescriptor descriptor;
    descriptor.rkey = remote_key;
    descriptor.address = remote_start();
    descriptor.length = remote_end() - remote_start();
    descriptor.access = (access() & access_remote_any).bits();
    // Little-endian on the wire; x86-64 and arm64 Linux are little-endian, checked at build time.
    static_assert(std::endian::native == std::endian::little);
    std::memcpy(buffer, &descriptor, sizeof(descriptor));
    *length = required;
    return {};
}

// ---- MemoryRegistry -------------------------------------------------------------------------

namespace {

// Whether `table` maps every page of `pages` where `pages` does: equal attributes alone do not make
// equal regions (two SGLs can share start and length and nothing else).
bool same_pages(const TranslationTable& table, const PageList& pages) {
    const std::uint64_t base = pages.address - pages.first_byte_offset;
    const std::uint64_t end = pages.address + pages.length;
    for (std::size_t i = 0; i < pages.page_count(); ++i) {
        const std::uint64_t page_start = base + (std::uint64_t{i} << pages.page_shift);
        if (page_start >= end) {
            break;
        }
        const std::uint64_t addr = std::max(page_start, pages.address);
        const std::uint64_t offset = addr - page_start;
        if (table.host(addr) != reinterpret_cast<std::uint8_t*>(pages.page_va[i] + offset) ||
            table.iova(addr) != pages.page_iova[i] + offset) {
            return false;
        }
    }
    return true;
}

} // namespace

MemoryRegistry::MemoryRegistry(const RegistryConfig& config, KeyTable keys)
    : config_(config), keys_(std::move(keys)) {}

MemoryRegistry::~MemoryRegistry() = default;

Result<std::unique_ptr<MemoryRegistry>> MemoryRegistry::create(const RegistryConfig& config) {
    if (config.page_sizes == 0) {
        return Error(StatusCode::invalid_parameter, "the device supports no page size");
    }
    if (config.translator.va_to_iova == nullptr || config.translator.iova_to_va == nullptr) {
        return Error(StatusCode::invalid_parameter, "address translator is incomplete");
    }
    auto keys = KeyTable::create(config.max_keys);
    if (!keys) {
        return keys.error();
    }
    return std::unique_ptr<MemoryRegistry>(new MemoryRegistry(config, std::move(keys.value())));
}

Result<MemoryRegion*> MemoryRegistry::new_region(RegionKind kind, std::uint32_t pd) {
    auto index = keys_.allocate();
    if (!index) {
        return index.error();
    }
    auto region = std::unique_ptr<MemoryRegion>(new MemoryRegion(*this, kind, pd, index.value()));
    MemoryRegion* raw = region.get();
    keys_.entry(index.value()).owner = raw;
    regions_.emplace(index.value(), std::move(region));
    return raw;
}

void MemoryRegistry::forget_dedup(MemoryRegion& region) {
    if (!region.dedup_key_) {
        return;
    }
    auto [first, last] = dedup_.equal_range(*region.dedup_key_);
    for (auto it = first; it != last; ++it) {
        if (it->second == &region) {
            dedup_.erase(it);
            break;
        }
    }
    region.dedup_key_.reset();
}

void MemoryRegistry::destroy(MemoryRegion* region) {
    forget_dedup(*region);
    if (region == dma_region_) {
        dma_region_ = nullptr;
    }
    const std::uint32_t index = region->index_;
    keys_.release(index);
    regions_.erase(index);
}

Result<MemoryRegion*> MemoryRegistry::register_pages(std::uint32_t pd, const PageList& pages,
                                                     AccessFlags access, RegionKind kind,
                                                     ConnectionId connection, bool deduplicate) {
    const AccessRuleError rule = check_access_rules(access);
    if (rule != AccessRuleError::ok) {
        return Error(StatusCode::invalid_parameter,
                     strformat("access 0x%x: %s", access.bits(),
                               std::string(access_rule_error_name(rule)).c_str()));
    }
    if (pages.length == 0 || pages.page_count() == 0) {
        return page_list_error(PageListError::zero_length, "register");
    }
    if (pages.length > config_.max_region_bytes) {
        return Error(StatusCode::no_resources,
                     strformat("region of %llu bytes exceeds the device maximum of %llu",
                               static_cast<unsigned long long>(pages.length),
                               static_cast<unsigned long long>(config_.max_region_bytes)));
    }
    if (const PageListError error = check_page_list(pages); error != PageListError::ok) {
        return page_list_error(error, "register");
    }
    const DedupKey dedup_key{pd, pages.address, pages.length, access, connection, kind};
    if (deduplicate) {
        auto [first, last] = dedup_.equal_range(dedup_key);
        for (auto it = first; it != last; ++it) {
            if (same_pages(*it->second->table(), pages)) {
                ++it->second->references_;
                return it->second;
            }
        }
    }
    auto table = TranslationTable::build(pages, config_.page_sizes);
    if (!table) {
        return table.error();
    }
    auto region = new_region(kind, pd);
    if (!region) {
        return region.error();
    }
    MemoryRegion* mr = region.value();
    mr->table_ = std::make_unique<TranslationTable>(std::move(table.value()));
    KeyEntry& e = keys_.entry(mr->index_);
    e.access = access | access_local_read;
    e.pd = pd;
    e.bound_connection = connection;
    e.start = pages.address;
    e.length = pages.length;
    e.table = mr->table_.get();
    keys_.validate(mr->index_);
    if (deduplicate) {
        dedup_.emplace(dedup_key, mr);
        mr->dedup_key_ = dedup_key;
    }
    return mr;
}

Result<MemoryRegion*> MemoryRegistry::register_virtual(std::uint32_t pd,
                                                       std::span<const VirtualPiece> pieces,
                                                       unsigned page_shift, AccessFlags access,
                                                       ConnectionId connection) {
    PageList pages;
    const PageListError error =
        build_virtual_page_list(pieces, page_shift, config_.translator, pages);
    if (error != PageListError::ok) {
        return page_list_error(error, "virtual registration");
    }
    return register_pages(pd, pages, access, RegionKind::virtual_range, connection);
}

Result<MemoryRegion*> MemoryRegistry::register_sgl(std::uint32_t pd,
                                                   std::span<const SglElement> sgl,
                                                   unsigned page_shift, AccessFlags access) {
    PageList pages;
    const PageListError error = build_sgl_page_list(sgl, page_shift, config_.translator, pages);
    if (error != PageListError::ok) {
        return page_list_error(error, "scatter/gather registration");
    }
    return register_pages(pd, pages, access, RegionKind::sgl);
}

Result<MemoryRegion*> MemoryRegistry::get_dma_region(std::uint32_t pd) {
    if (dma_region_ != nullptr) {
        ++dma_region_->references_;
        return dma_region_;
    }
    auto region = new_region(RegionKind::dma, pd);
    if (!region) {
        return region.error();
    }
    MemoryRegion* mr = region.value();
    KeyEntry& e = keys_.entry(mr->index_);
    e.access = access_local_read | access_local_write;
    e.pd = pd;
    e.any_pd = true;
    e.lkey_only = true;
    e.identity = true;
    e.start = 0;
    e.length = ~std::uint64_t{0};
    keys_.validate(mr->index_);
    dma_region_ = mr;
    return mr;
}

Result<MemoryRegion*> MemoryRegistry::allocate_fast_reg(std::uint32_t pd, std::uint32_t max_pages,
                                                        AccessFlags allowed_access) {
    const AccessRuleError rule = check_access_rules(allowed_access);
    if (rule != AccessRuleError::ok) {
        return Error(StatusCode::invalid_parameter,
                     strformat("access 0x%x: %s", allowed_access.bits(),
                               std::string(access_rule_error_name(rule)).c_str()));
    }
    if (max_pages == 0 || max_pages > config_.max_fast_reg_pages) {
        return Error(StatusCode::invalid_parameter,
                     strformat("fast-register page capacity %u outside [1, %u]", max_pages,
                               config_.max_fast_reg_pages));
    }
    auto table = TranslationTable::with_capacity(max_pages);
    if (!table) {
        return table.error();
    }
    auto region = new_region(RegionKind::fast_reg, pd);
    if (!region) {
        return region.error();
    }
    MemoryRegion* mr = region.value();
    mr->table_ = std::make_unique<TranslationTable>(std::move(table.value()));
    mr->max_pages_ = max_pages;
    mr->allowed_access_ = allowed_access | access_local_read;
    KeyEntry& e = keys_.entry(mr->index_);
    e.pd = pd;
    e.table = mr->table_.get();
    // Stays `invalid` (from allocate()) until the first FAST_REG.
    return mr;
}

Status MemoryRegistry::reregister(MemoryRegion& region, AccessFlags access) {
    if (region.kind_ == RegionKind::dma || region.kind_ == RegionKind::fast_reg) {
        return Error(StatusCode::not_supported,
                     "only virtual and scatter/gather regions can be re-registered");
    }
    const AccessRuleError rule = check_access_rules(access);
    if (rule != AccessRuleError::ok) {
        return Error(StatusCode::invalid_parameter,
                     strformat("access 0x%x: %s", access.bits(),
                               std::string(access_rule_error_name(rule)).c_str()));
    }
    if (region.references_ > 1) {
        return Error(StatusCode::busy, strformat("the region has %u references; re-registering "
                                                 "would change it under the other holders",
                                                 region.references_));
    }
    KeyEntry& e = keys_.entry(region.index_);
    if (region.dedup_key_) {
        DedupKey key = *region.dedup_key_;
        forget_dedup(region);
        std::get<3>(key) = access;
        dedup_.emplace(key, &region);
        region.dedup_key_ = key;
    }
    e.access = access | access_local_read;
    keys_.validate(region.index_);
    return {};
}

Status MemoryRegistry::deregister(MemoryRegion* region) {
    if (region == nullptr || region->registry_ != this) {
        return Error(StatusCode::invalid_parameter, "not a region of this registry");
    }
    if (--region->references_ > 0) {
        return {};
    }
    destroy(region);
    return {};
}

Status MemoryRegistry::retire(MemoryRegion* region, bool& last) {
    last = false;
    if (region == nullptr || region->registry_ != this || region->retired_) {
        return Error(StatusCode::invalid_parameter, "not a live region of this registry");
    }
    if (--region->references_ > 0) {
        return {};
    }
    forget_dedup(*region);
    if (region == dma_region_) {
        dma_region_ = nullptr;
    }
    region->retired_ = true;
    keys_.retire(region->index_);
    last = true;
    return {};
}

void MemoryRegistry::reclaim(MemoryRegion* region) {
    if (region != nullptr && region->registry_ == this && region->retired_) {
        destroy(region);
    }
}

FastRegResult MemoryRegistry::fast_register(MemoryRegion& region, std::uint32_t pd,
                                            MemoryKey new_key, const FastRegRequest& request,
                                            AccessFlags access,
                                            PageListError* page_error) noexcept {
    if (region.kind_ != RegionKind::fast_reg) {
        return FastRegResult::not_fast_reg_region;
    }
    if (region.retired_) {
        return FastRegResult::retired;
    }
    if (keys_.entry(region.index_).state == KeyState::valid) {
        return FastRegResult::still_valid;
    }
    if (region.pd_ != pd) {
        return FastRegResult::wrong_pd;
    }
    if (key_index(new_key) != region.index_) {
        return FastRegResult::key_index_changed;
    }
    if (region.last_fast_reg_variant_ == key_variant(new_key)) {
        return FastRegResult::variant_not_changed;
    }
    if (check_access_rules(access) != AccessRuleError::ok) {
        return FastRegResult::bad_access;
    }
    if (!region.allowed_access_.all_of(access)) {
        return FastRegResult::access_violation;
    }
    PageListError error = check_fast_reg(request, region.max_pages_);
    KeyEntry& e = keys_.entry(region.index_);
    if (error == PageListError::ok) {
        // Invalid while loading: a lookup between here and the end never sees a half table.
        e.state = KeyState::invalid;
        error = region.table_->load(request, config_.translator);
    }
    if (page_error != nullptr) {
        *page_error = error;
    }
    if (error != PageListError::ok) {
        return FastRegResult::bad_page_list;
    }
    e.access = access | access_local_read;
    e.start = request.base_va;
    e.length = request.length;
    keys_.set_variant(region.index_, key_variant(new_key));
    e.state = KeyState::valid;
    region.last_fast_reg_variant_ = key_variant(new_key);
    return FastRegResult::ok;
}

InvalidateResult MemoryRegistry::invalidate(MemoryKey key, std::uint32_t pd) noexcept {
    const std::uint32_t index = key_index(key);
    if (index == 0 || index >= keys_.capacity()) {
        return InvalidateResult::bad_key;
    }
    KeyEntry& e = keys_.entry(index);
    if (e.state != KeyState::valid || e.variant != key_variant(key)) {
        return InvalidateResult::bad_key;
    }
    if (e.pd != pd) {
        return InvalidateResult::wrong_pd;
    }
    const auto* region = static_cast<const MemoryRegion*>(e.owner);
    if (region->kind_ != RegionKind::fast_reg) {
        return InvalidateResult::not_invalidatable;
    }
    keys_.invalidate(index);
    region->table_->clear();
    return InvalidateResult::ok;
}

} // namespace prdma::mem
