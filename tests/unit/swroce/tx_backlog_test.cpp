// The group's tx backlog on a port that refuses frames: the ring net_ring transmits into is filled
// first, so every send_frames the device tries takes nothing until the test drains it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "arp.hpp"
#include "role_fixture.hpp"

namespace prdma::swroce::test {
namespace {

class TxBacklog : public RoleTest {
protected:
    void SetUp() override {
        RoleTest::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        pool_ = dev().port.mempool(0);
        ASSERT_NE(pool_, nullptr);
        // Stand-ins for frames the peer has not taken yet.
        while (rte_ring_free_count(wire()) > 0) {
            rte_mbuf* mbuf = rte_pktmbuf_alloc(pool_);
            ASSERT_NE(mbuf, nullptr);
            ASSERT_EQ(rte_ring_enqueue(wire(), mbuf), 0);
            ++filler_;
        }
    }

    // Everything on the wire; the fillers are freed, the rest returned in order.
    std::vector<rte_mbuf*> drain_wire() {
        std::vector<rte_mbuf*> out;
        void* object = nullptr;
        while (rte_ring_dequeue(wire(), &object) == 0) {
            if (filler_ > 0) {
                --filler_;
                rte_pktmbuf_free(static_cast<rte_mbuf*>(object));
            } else {
                out.push_back(static_cast<rte_mbuf*>(object));
            }
        }
        return out;
    }

    void TearDown() override {
        for (rte_mbuf* mbuf : drain_wire()) {
            rte_pktmbuf_free(mbuf);
        }
        RoleTest::TearDown();
    }

    [[nodiscard]] QueueGroupState& group0() const { return *dev().groups[0]; }

    // A batch of `count` marked frames (their first byte is their number).
    TxBatch marked_batch(std::uint16_t count, std::uint8_t first) const {
        TxBatch tx;
        for (std::uint16_t i = 0; i < count; ++i) {
            rte_mbuf* mbuf = rte_pktmbuf_alloc(pool_);
            EXPECT_NE(mbuf, nullptr);
            if (mbuf == nullptr) {
                break;
            }
            char* data = rte_pktmbuf_append(mbuf, 60);
            EXPECT_NE(data, nullptr);
            if (data != nullptr) {
                data[0] = static_cast<char>(first + i);
            }
            tx.mbufs[tx.count++] = mbuf;
        }
        return tx;
    }

private:
    rte_mempool* pool_ = nullptr;
    std::size_t filler_ = 0;
};

TEST_F(TxBacklog, RefusedFramesWaitInOrderAndOnlyThoseBeyondItsRoomAreLost) {
    const std::size_t room = group0().tx_backlog.size();
    std::uint8_t mark = 0;
    std::uint64_t made = 0;
    while (made < room + 64) {
        TxBatch tx = marked_batch(64, mark);
        mark = static_cast<std::uint8_t>(mark + 64);
        made += 64;
        EXPECT_FALSE(transmit(dev(), 0, tx)) << "the port took nothing";
    }
    EXPECT_EQ(group0().counters.tx_deferred, room);
    EXPECT_EQ(group0().counters.tx_dropped, made - room);
    EXPECT_FALSE(flush_backlog(dev(), 0)) << "still nowhere to put them";

    (void)drain_wire();
    EXPECT_TRUE(flush_backlog(dev(), 0));
    const std::vector<rte_mbuf*> sent = drain_wire();
    ASSERT_EQ(sent.size(), room);
    for (std::size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(*rte_pktmbuf_mtod(sent[i], std::uint8_t*), static_cast<std::uint8_t>(i)) << i;
        rte_pktmbuf_free(sent[i]);
    }
}

// An ARP reply the port refuses used to be dropped at once: a peer resolving us while our RDMA
// traffic fills the ring (1 MiB WRITEs) lost its answer and tx_dropped counted it.
TEST_F(TxBacklog, AnArpReplyThePortRefusesWaitsForTheNextProgress) {
    std::array<std::uint8_t, 60> request{};
    ASSERT_GT(build_arp_request(request, peer_mac, peer_ip, our_ip), 0U);
    ASSERT_TRUE(handle_neighbour_frame(dev(), request, tsc(), group0().counters));
    EXPECT_EQ(group0().counters.tx_dropped, 0U);
    EXPECT_EQ(group0().counters.tx_deferred, 1U);
    EXPECT_EQ(group0().counters.arp_replies_sent, 1U);

    (void)drain_wire();
    EXPECT_TRUE(flush_backlog(dev(), 0));
    const std::vector<rte_mbuf*> sent = drain_wire();
    ASSERT_EQ(sent.size(), 1U);
    const std::span<const std::uint8_t> reply(rte_pktmbuf_mtod(sent[0], const std::uint8_t*),
                                              rte_pktmbuf_data_len(sent[0]));
    EXPECT_TRUE(is_arp_frame(reply));
    EXPECT_TRUE(std::equal(peer_mac.begin(), peer_mac.end(), reply.begin()))
        << "not addressed to the peer that asked";
    rte_pktmbuf_free(sent[0]);
}

} // namespace
} // namespace prdma::swroce::test
