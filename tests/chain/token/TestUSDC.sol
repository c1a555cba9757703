// SPDX-License-Identifier: MIT
// The chain tests' gasless stablecoin: a 6-decimal ERC-20 with ERC-3009's transferWithAuthorization,
// as USDC and EURC have it (EIP-712 domain name = the token's name, version "2"): a holder signs, anyone
// submits and pays the gas. The deployer receives the whole supply.
// Only what a payment needs: transferWithAuthorization and authorizationState (no receive- or
// cancelAuthorization), with OpenZeppelin's EIP-712 (eip712Domain(), EIP-5267) and ECDSA (no
// malleable signatures).
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

contract TestUSDC is ERC20, EIP712 {
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );

    mapping(address authorizer => mapping(bytes32 nonce => bool)) private _used;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);

    constructor(uint256 supply) ERC20("Test USD Coin", "TUSDC") EIP712("Test USD Coin", "2") {
        _mint(msg.sender, supply);
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function version() external pure returns (string memory) {
        return "2";
    }

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _used[authorizer][nonce];
    }

    function transferWithAuthorization(
        address from, address to, uint256 value, uint256 validAfter, uint256 validBefore,
        bytes32 nonce, uint8 v, bytes32 r, bytes32 s
    ) external {
        require(block.timestamp > validAfter, "authorization is not yet valid");
        require(block.timestamp < validBefore, "authorization is expired");
        require(!_used[from][nonce], "authorization is used");
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce
        )));
        require(ECDSA.recover(digest, v, r, s) == from, "invalid signature");
        _used[from][nonce] = true;
        emit AuthorizationUsed(from, nonce);
        _transfer(from, to, value);
    }
}
