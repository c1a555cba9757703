// SPDX-License-Identifier: MIT
// A Chainlink-style price feed (AggregatorV3Interface, exactly) whose rounds the tests set: anyone
// may call setAnswer (the next round, now) or setRound (any round as given, made the latest), so a
// test can make a stale, future, zero, negative or answeredInRound < roundId answer. It also serves
// as an L2 sequencer uptime feed (Chainlink's convention: answer 0 = up, 1 = down, startedAt =
// when the status last changed).
pragma solidity ^0.8.20;

contract TestPriceFeed {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
        uint80 answeredInRound;
        bool exists; // a round may be written with zero times, so existence is kept apart
    }

    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;
    uint80 public latestRound;
    mapping(uint80 => Round) private rounds;

    constructor(uint8 decimals_, string memory description_, int256 answer_) {
        decimals = decimals_;
        description = description_;
        setRound(1, answer_, block.timestamp, block.timestamp, 1);
    }

    /// The next round (latest + 1), started and updated now, answered in itself.
    function setAnswer(int256 answer) external {
        uint80 roundId = latestRound + 1;
        setRound(roundId, answer, block.timestamp, block.timestamp, roundId);
    }

    /// Any round, as given, made the latest.
    function setRound(uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt,
                      uint80 answeredInRound) public {
        rounds[roundId] = Round(answer, startedAt, updatedAt, answeredInRound, true);
        latestRound = roundId;
    }

    function getRoundData(uint80 _roundId) public view returns (uint80 roundId, int256 answer,
            uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) {
        Round storage r = rounds[_roundId];
        require(r.exists, "No data present");
        return (_roundId, r.answer, r.startedAt, r.updatedAt, r.answeredInRound);
    }

    function latestRoundData() external view returns (uint80 roundId, int256 answer,
            uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) {
        return getRoundData(latestRound);
    }
}
