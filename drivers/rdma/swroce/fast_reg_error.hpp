// Which FAST_REG rule failed, as the completion reports it (rdma::FastRegVendorError): the
// registry's answer, and for a bad page array the page-list rule behind it.
#pragma once

#include <prdma/mem/memory_registry.hpp>
#include <prdma/rdmadev/work_request.hpp>

namespace prdma::swroce {

constexpr rdma::FastRegVendorError page_list_vendor_error(mem::PageListError error) noexcept {
    using V = rdma::FastRegVendorError;
    switch (error) {
    case mem::PageListError::ok:
        return V::none;
    case mem::PageListError::bad_page_size:
        return V::bad_page_size;
    case mem::PageListError::no_pages:
    case mem::PageListError::inconsistent_page_list:
        return V::no_pages;
    case mem::PageListError::too_many_pages:
        return V::too_many_pages;
    case mem::PageListError::zero_length:
        return V::zero_length;
    case mem::PageListError::fbo_beyond_page:
        return V::fbo_beyond_page;
    case mem::PageListError::length_beyond_pages:
        return V::length_beyond_pages;
    case mem::PageListError::base_va_not_fbo_aligned:
        return V::base_va_not_fbo_aligned;
    case mem::PageListError::address_overflow:
        return V::address_overflow;
    case mem::PageListError::page_not_aligned:
        return V::page_not_aligned;
    default:
        // The rest are the translator's (no IOVA, no CPU mapping): the page cannot be reached.
        return V::page_not_mapped;
    }
}

constexpr rdma::FastRegVendorError fast_reg_vendor_error(mem::FastRegResult result,
                                                         mem::PageListError page_error) noexcept {
    using V = rdma::FastRegVendorError;
    switch (result) {
    case mem::FastRegResult::ok:
        return V::none;
    case mem::FastRegResult::not_fast_reg_region:
        return V::not_fast_reg_region;
    case mem::FastRegResult::key_index_changed:
        return V::key_index_changed;
    case mem::FastRegResult::variant_not_changed:
        return V::variant_not_changed;
    case mem::FastRegResult::still_valid:
        return V::still_valid;
    case mem::FastRegResult::wrong_pd:
        return V::wrong_pd;
    case mem::FastRegResult::access_violation:
        return V::access_violation;
    case mem::FastRegResult::bad_access:
        return V::bad_access;
    case mem::FastRegResult::retired:
        return V::retired;
    case mem::FastRegResult::bad_page_list:
        return page_list_vendor_error(page_error);
    }
    return V::page_not_mapped; // unreachable: every result is listed
}

} // namespace prdma::swroce
